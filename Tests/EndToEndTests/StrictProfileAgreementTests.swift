import Foundation
import PinTestSupport
import PinTrust
import XCTest

/// The strict certificate profile's cases through the real binary: `pinproxy evaluate` gives each
/// case its verdict, and the daemon, fetching through a real origin that
/// serves each chain, refuses or accepts exactly as `evaluate` does.
final class StrictProfileAgreementTests: ProxyTestCase {
  /// What `pinproxy evaluate` prints for a case: `trusted` or the failure code.
  func evaluate(_ name: String, at instant: String?) throws -> (outcome: String, line: String) {
    var arguments = [
      "evaluate", "--host", StrictCases.hosts[name]!, "--chain", StrictCases.chainPath(name), "--anchors",
      StrictCases.anchorsPath(name),
    ]
    if let instant { arguments += ["--at", instant] }
    let result = try Subprocess.pinproxy(arguments)
    let line = result.stdout.trimmingCharacters(in: .newlines)
    if line == "trusted" {
      XCTAssertEqual(result.status, 0, name)
      return ("trusted", line)
    }
    XCTAssertEqual(result.status, 1, "\(name): \(line) \(result.stderr)")
    let code = line.split(separator: ":").dropFirst().first.map { $0.trimmingCharacters(in: .whitespaces) }
    return (code ?? "?", line)
  }

  func testEvaluateGivesEveryCaseItsVerdict() throws {
    for testCase in StrictCases.all {
      let (outcome, line) = try evaluate(testCase.name, at: "2026-06-01T00:00:00Z")
      switch testCase.verdict {
      case .trusted:
        XCTAssertEqual(outcome, "trusted", "\(testCase.name): \(line)")
      case .rejected(let code, let fragment):
        XCTAssertEqual(outcome, code.rawValue, "\(testCase.name): \(line)")
        XCTAssertTrue(line.contains(fragment), "\(testCase.name): \(line)")
      }
    }
  }

  func testEvaluateTreatsNotAfterAsInclusiveToTheFractionOfASecond() throws {
    XCTAssertEqual(try evaluate("validity-edge", at: "2030-06-01T12:00:00Z").outcome, "trusted")
    XCTAssertEqual(try evaluate("validity-edge", at: "2030-06-01T12:00:00.000Z").outcome, "trusted")
    XCTAssertEqual(try evaluate("validity-edge", at: "2030-06-01T11:59:59.999Z").outcome, "trusted")
    XCTAssertEqual(try evaluate("validity-edge", at: "2030-06-01T12:00:00.001Z").outcome, "expired")
  }

  /// Cases whose leaf key no TLS 1.2/1.3 handshake with an ATS client can
  /// use: no signature scheme or cipher suite fits, so the daemon refuses
  /// the handshake (`weak-cipher`) before there is a chain to evaluate.
  /// Both refuse; only the code differs.
  static let handshakeCannotComplete: Set<String> = ["leaf-dsa", "leaf-p192", "leaf-secp256k1"]

  func testDaemonAgreesWithEvaluateOnEveryCase() throws {
    // Two cases are for 127.0.0.1, so the cases run in rounds of distinct hosts.
    var rounds: [[StrictCases.Case]] = []
    for testCase in StrictCases.all {
      let host = StrictCases.hosts[testCase.name]!
      if let index = rounds.firstIndex(where: { !$0.contains { StrictCases.hosts[$0.name] == host } }) {
        rounds[index].append(testCase)
      } else {
        rounds.append([testCase])
      }
    }
    var compared = 0
    for round in rounds {
      compared += try runRound(round)
      proxy?.stop()
      proxy = nil
    }
    XCTAssertEqual(compared, StrictCases.all.count)
  }

  /// One origin serving every case of the round by SNI (the IP case without
  /// SNI gets the default), one daemon with an anchor set and a rule per case.
  func runRound(_ round: [StrictCases.Case]) throws -> Int {
    let ipCase = round.first { IPAddress(StrictCases.hosts[$0.name]!) != nil }
    let fallback = ipCase?.name ?? "baseline"
    var sni: [String] = []
    for testCase in round where testCase.name != ipCase?.name {
      let host = StrictCases.hosts[testCase.name]!
      sni += [
        "--sni", "\(host)=\(StrictCases.chainPath(testCase.name)):\(StrictCases.keyPath(testCase.name))",
      ]
    }
    let origin = try origin(
      certificate: StrictCases.chainPath(fallback), key: StrictCases.keyPath(fallback), arguments: sni)
    var anchorSets: [String] = []
    var domains: [String] = []
    var connectTo: [String] = []
    for (index, testCase) in round.enumerated() {
      let host = StrictCases.hosts[testCase.name]!
      anchorSets.append("  case\(index): {files: [\"\(StrictCases.anchorsPath(testCase.name))\"]}")
      domains.append("  - {domain: \"\(host)\", anchors: [case\(index)]}")
      connectTo.append("\"\(host):443:127.0.0.1:\(origin.port)\"")
    }
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: [\(connectTo.joined(separator: ", "))]
      anchorSets:
      \(anchorSets.joined(separator: "\n"))
      defaults: {action: deny}
      domains:
      \(domains.joined(separator: "\n"))
      """
    let process = try ProxyProcess(config: config, listeners: ["forward"])
    proxy = process
    let port = process.ports["forward"]!
    for testCase in round {
      let host = StrictCases.hosts[testCase.name]!
      let daemon = try get("http://\(host)/hello", through: port)
      let daemonOutcome =
        daemon.status == 200 ? "trusted" : (daemon.pinproxyError ?? "status \(daemon.status)")
      let (cliOutcome, line) = try evaluate(testCase.name, at: nil)
      if Self.handshakeCannotComplete.contains(testCase.name) {
        XCTAssertNotEqual(cliOutcome, "trusted", "\(testCase.name): \(line)")
        XCTAssertEqual(daemon.status, 502, "\(testCase.name): \(daemon.text)")
        XCTAssertEqual(daemon.pinproxyError, "weak-cipher", "\(testCase.name): \(daemon.text)")
      } else {
        XCTAssertEqual(
          daemonOutcome, cliOutcome, "\(testCase.name): daemon \(daemon.text) / evaluate \(line)")
      }
    }
    return round.count
  }

  func origin(certificate: String, key: String, arguments: [String]) throws -> Origin {
    let origin = try Origin(certificate: certificate, key: key, arguments: arguments)
    origins.append(origin)
    return origin
  }
}
