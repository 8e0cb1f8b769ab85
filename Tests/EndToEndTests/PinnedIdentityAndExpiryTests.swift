import Foundation
import PinTestSupport
import XCTest

/// ATS identities and `pinsExpire` through the real binary: refusals that
/// name the list that failed, and expired pins that fail open loudly (start
/// and reload warnings, the metric, `/policies`, `check`).
final class PinnedIdentityAndExpiryTests: ProxyTestCase {
  lazy var wrongKey = Fixtures.certificate("adn.pem").spkiPin

  static func day(_ offset: TimeInterval) -> String {
    Date().addingTimeInterval(offset).formatted(.iso8601.year().month().day())
  }

  func testIdentitiesRefuseWithTheListThatFailedAndAcceptWhenTheyMatch() throws {
    let origin = try origin()
    let port = try startProxy(
      map: ["httpbin.org": origin, "leaf.httpbin.org": origin, "ca.httpbin.org": origin],
      domains: """
          - {domain: httpbin.org, anchors: [test], pinnedCAPublicKeyHashes: ["\(Fixtures.certificate("root-b.pem").spkiPin)"]}
          - {domain: leaf.httpbin.org, anchors: [test], pinnedLeafPublicKeyHashes: ["\(Fixtures.certificate("httpbin.pem").spkiPin)"]}
          - domain: ca.httpbin.org
            anchors: [test]
            pinnedLeafPublicKeyHashes: ["\(Fixtures.certificate("httpbin.pem").spkiPin)"]
            pinnedCAPublicKeyHashes: ["\(Fixtures.certificate("root-a.pem").spkiPin)"]
        """)
    let refused = try get("http://httpbin.org/hello", through: port)
    assertRefused(refused, 502, "pin-mismatch")
    XCTAssertTrue(refused.text.contains("pinnedCAPublicKeyHashes"), refused.text)
    XCTAssertEqual(try get("http://leaf.httpbin.org/hello", through: port).status, 200)
    XCTAssertEqual(try get("http://ca.httpbin.org/hello", through: port).status, 200)
  }

  func testExpiredPinsFailOpenLoudlyAndPinsAboutToExpireAreStillEnforced() throws {
    let origin = try origin()
    let expired = Self.day(-2 * 86_400)
    let soon = Self.day(10 * 86_400)
    let domains = """
          - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(wrongKey)"], pinsExpire: "\(expired)"}
          - {domain: soon.httpbin.org, anchors: [test], pinnedLeafPublicKeyHashes: ["\(wrongKey)"], pinsExpire: "\(soon)"}
      """
    let port = try startProxy(
      map: ["httpbin.org": origin, "soon.httpbin.org": origin], domains: domains,
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#, names: ["admin"])
    let process = try XCTUnwrap(proxy)
    XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200, process.log)
    assertRefused(try get("http://soon.httpbin.org/hello", through: port), 502, "pin-mismatch")

    // At start: one warning per rule.
    XCTAssertTrue(process.child.wait(for: "pins-expired"), process.log)
    // Lines (and the rest of one) may still be on their way: waited for.
    XCTAssertTrue(process.child.wait(for: "are NOT enforced"), process.log)
    XCTAssertTrue(process.child.wait(for: "pins-expire-soon"), process.log)

    // The gauge: negative once expired, positive before.
    let admin = process.ports["admin"]!
    let metrics = try Curl.run(["http://127.0.0.1:\(admin)/metrics"]).text
    let samples = metrics.split(separator: "\n").filter { $0.hasPrefix("pinproxy_pins_expire_seconds{") }
    XCTAssertEqual(samples.count, 2, metrics)
    let values = Dictionary(
      uniqueKeysWithValues: samples.map { line -> (String, Double) in
        let parts = line.split(separator: " ")
        return (String(parts[0]), Double(parts[1]) ?? 0)
      })
    XCTAssertLessThan(values["pinproxy_pins_expire_seconds{rule=\"httpbin.org\"}"] ?? 0, -86_400, metrics)
    XCTAssertGreaterThan(
      values["pinproxy_pins_expire_seconds{rule=\"soon.httpbin.org\"}"] ?? 0, 86_400, metrics)

    // /policies says the pins expired.
    let policies = try Curl.run(["http://127.0.0.1:\(admin)/policies"])
    let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: policies.body) as? [String: Any])
    let rules = try XCTUnwrap(json["domains"] as? [[String: Any]])
    XCTAssertEqual(rules[0]["pinsExpired"] as? Bool, true)
    XCTAssertEqual(rules[1]["pinsExpired"] as? Bool, false)
    XCTAssertEqual(rules[1]["pinnedLeafPublicKeyHashes"] as? [String], [wrongKey])

    // A reload says it again.
    let before = process.log.components(separatedBy: "pins-expired").count
    process.child.signal(SIGHUP)
    XCTAssertTrue(
      PinListServer.eventually { process.log.components(separatedBy: "pins-expired").count > before })

    // `check` warns (exit 0), naming file, line and key.
    let check = try Subprocess.pinproxy(["check", "--config", process.configFile])
    XCTAssertEqual(check.status, 0, check.stderr)
    XCTAssertTrue(
      check.stderr.contains("domains[0].pinsExpire: warning: the pins of rule httpbin.org expired"),
      check.stderr)
    XCTAssertTrue(
      check.stderr.contains(
        "domains[1].pinsExpire: warning: the pins of rule soon.httpbin.org expire on \(soon)"), check.stderr)
  }

  func testEvaluateSaysWhenItAcceptedOnExpiredPins() throws {
    let directory = NSTemporaryDirectory() + "expiry-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let config = directory + "/pinproxy.yaml"
    try """
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    domains:
      - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(wrongKey)"], pinsExpire: "2026-05-01"}
    """.write(toFile: config, atomically: true, encoding: .utf8)
    let chain = Fixtures.path("httpbin-chain.pem")
    let before = try Subprocess.pinproxy(
      [
        "evaluate", "--host", "httpbin.org", "--chain", chain, "--config", config, "--at",
        "2026-04-30T23:59:59Z",
      ])
    XCTAssertTrue(before.stdout.hasPrefix("rejected: pin-mismatch: "), before.stdout)
    let after = try Subprocess.pinproxy(
      [
        "evaluate", "--host", "httpbin.org", "--chain", chain, "--config", config, "--at",
        "2026-05-01T00:00:00Z",
      ])
    XCTAssertEqual(after.stdout, "trusted\n", after.stderr)
    XCTAssertTrue(
      after.stderr.contains("expired on 2026-05-01") && after.stderr.contains("not enforced"), after.stderr)
  }
}
