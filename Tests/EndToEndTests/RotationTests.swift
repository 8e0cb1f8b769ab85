import Foundation
import PinTestSupport
import XCTest

/// From a refusal to its fix: the day a server rotates its key. The
/// quick start's PKI (config/examples: a national root, an intermediate, a
/// leaf for *.bank.example served by `openssl s_server`), rules that pin the
/// root's key (allowed) and a key the server does not have (refused),
/// listeners that splice, and the real binary, curl and Python.
final class RotationTests: ProxyTestCase {
  static let examples = Fixtures.repositoryRoot + "/config/examples"
  /// The leaf's SPKI pin (`pinproxy pin config/examples/api.bank.example.pem`).
  static let leafPin = "sha256/vjO8uqWcEeGHWAKHce1FprcdpcK12nlMvP9cljdkhuk="
  /// A key nobody has.
  static let strayPin = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="

  var origin: OpenSSLServer!
  var scratch = ""

  override func setUpWithError() throws {
    scratch =
      FileManager.default.temporaryDirectory.appendingPathComponent("rotation-\(UUID().uuidString)")
      .path
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    origin = try OpenSSLServer(
      certificate: Self.examples + "/api.bank.example.pem", key: Self.examples + "/api.bank.example.key",
      chain: Self.examples + "/intermediate.pem")
  }

  override func tearDown() {
    origin.stop()
    super.tearDown()
    try? FileManager.default.removeItem(atPath: scratch)
  }

  /// The rules: api pins the national root's key (not sent by the server),
  /// pay pins a stray key. `listeners` are added to a forward listener and
  /// the admin endpoint.
  func config(listeners: String = "", payPins: [String] = [RotationTests.strayPin]) -> String {
    """
    admin: {address: "127.0.0.1:{port:admin}"}
    listeners:
      - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
    \(listeners)
    connectTo: ["api.bank.example:443:127.0.0.1:\(origin.port)", "pay.bank.example:443:127.0.0.1:\(origin.port)"]
    anchorSets:
      national: {files: ["\(Self.examples)/national-root.pem"]}
    defaults: {action: deny}
    domains:
      - domain: api.bank.example
        anchors: [national]
        pinningMode: publicKey
        pinnedCertificates: ["\(Self.examples)/national-root.pem"]
      - domain: pay.bank.example
        anchors: [national]
        pinningMode: publicKey
        pinnedPublicKeyHashes: [\(payPins.map { "\"\($0)\"" }.joined(separator: ", "))]
    """
  }

  func start(listeners: String = "", names: [String] = []) throws {
    proxy = try ProxyProcess(config: config(listeners: listeners), listeners: ["forward", "admin"] + names)
  }

  var port: Int { proxy!.ports["forward"]! }
  var admin: String { "127.0.0.1:\(proxy!.ports["admin"]!)" }

  func pinproxy(_ arguments: [String]) throws -> ProcessResult { try Subprocess.pinproxy(arguments) }

  /// curl through `listenerPort` to `https://HOST/` (a CONNECT): the CONNECT
  /// status, and the exit status.
  func connect(_ host: String, through listenerPort: Int) throws -> (connect: String, exit: Int32) {
    let result = try Subprocess.run(
      "/usr/bin/curl",
      [
        "-s", "-o", "/dev/null", "-w", "%{http_connect}", "--max-time", "10", "--cacert",
        Self.examples + "/national-root.pem", "-x", "http://127.0.0.1:\(listenerPort)", "https://\(host)/",
      ])
    return (result.stdout, result.status)
  }

  // MARK: 1. Pins are never bypassed silently

  func testAPinnedHostIsNeverSplicedUnlessAPassthroughEntryNamesIt() throws {
    try start(
      listeners: """
          - {name: splice, address: "127.0.0.1:{port:splice}", mode: forward, intercept: false}
          - {name: patterns, address: "127.0.0.1:{port:patterns}", mode: forward, passthrough: ["*.bank.example"]}
          - {name: waiver, address: "127.0.0.1:{port:waiver}", mode: forward, passthrough: ["pay.bank.example"]}
        """, names: ["splice", "patterns", "waiver"])
    for name in ["splice", "patterns"] {
      let refused = try connect("pay.bank.example", through: proxy!.ports[name]!)
      XCTAssertEqual(refused.connect, "403", "\(name): the CONNECT is refused")
      XCTAssertNotEqual(refused.exit, 0, name)
    }
    XCTAssertTrue(proxy!.waitForLine { $0.contains("code=pins-not-enforceable") }, proxy!.log)
    let line = try XCTUnwrap(proxy!.completeLogLines.first { $0.contains("code=pins-not-enforceable") })
    XCTAssertTrue(line.contains("rule pay.bank.example pins pay.bank.example"), line)
    XCTAssertTrue(line.contains("listener splice has intercept: false"), line)
    XCTAssertTrue(proxy!.child.wait(for: "a passthrough pattern of listener patterns"), proxy!.log)
    // Absolute-form requests on a splicing listener are pinned as before.
    let absolute = try get("http://pay.bank.example/", through: proxy!.ports["splice"]!)
    assertRefused(absolute, 502, "pin-mismatch")

    // Named by an entry: spliced on purpose, said at start and counted.
    let waived = try connect("pay.bank.example", through: proxy!.ports["waiver"]!)
    XCTAssertEqual(waived.connect, "200", "the waiver splices")
    XCTAssertEqual(waived.exit, 0)
    XCTAssertTrue(proxy!.log.contains(" pins-waived "), proxy!.log)
    XCTAssertTrue(
      proxy!.log.contains(
        "passthrough entry pay.bank.example of listener waiver waives the pins of rule pay.bank.example"),
      proxy!.log)
    let metrics = try Curl.run(["http://\(admin)/metrics"]).text
    XCTAssertTrue(
      metrics.contains(#"pinproxy_passthrough_tunnels_total{listener="waiver",rule="pay.bank.example"} 1"#),
      metrics)

    // check names the entry that waives the pins, file and line.
    let check = try pinproxy(["check", "--config", proxy!.configFile])
    XCTAssertEqual(check.status, 0, check.stderr)
    XCTAssertTrue(check.stderr.contains("\(proxy!.configFile):"), check.stderr)
    XCTAssertTrue(
      check.stderr.contains("passthrough[0]: warning: passthrough entry pay.bank.example"), check.stderr)
  }

  // MARK: 2. Pin health on the path as built

  func testPinHealthCountsAPinnedRootTheServerDoesNotSend() throws {
    try start()
    XCTAssertEqual(try get("http://api.bank.example/", through: port).status, 200, proxy!.log)
    let policies = try Curl.run(["http://\(admin)/policies"]).text
    let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(policies.utf8)) as? [String: Any])
    let rule = try XCTUnwrap(
      (json["domains"] as? [[String: Any]])?.first { ($0["domain"] as? String) == "api.bank.example" })
    let health = try XCTUnwrap(rule["pinHealth"] as? [String: Any], policies)
    XCTAssertEqual(health["matchedSubject"] as? String, "CN=Pinproxy Test Root A,O=pinproxy tests", policies)
    XCTAssertEqual(health["backupPins"] as? [String], [], policies)
    XCTAssertFalse(((health["warnings"] as? [String]) ?? []).joined().contains("report-only"), policies)
    let metrics = try Curl.run(["http://\(admin)/metrics"]).text
    XCTAssertTrue(
      metrics.contains(#"pinproxy_pinned_certificate_expiry_seconds{rule="api.bank.example"}"#), metrics)
    XCTAssertTrue(
      metrics.contains(
        #"pinproxy_rule_last_verdict_timestamp_seconds{rule="api.bank.example",outcome="accepted"}"#),
      metrics)
  }

  // MARK: 3 and 4. A refusal that says what to do, where every client shows it

  func testAPinFailureOnAnOtherwiseValidChainNamesThePinTheKeyAndTheLine() throws {
    try start(
      listeners: """
          - {name: public, address: "127.0.0.1:{port:public}", mode: forward, refusalDetail: summary}
        """, names: ["public"])
    let refused = try get("http://pay.bank.example/", through: port)
    assertRefused(refused, 502, "pin-mismatch")
    XCTAssertTrue(
      refused.text.contains(
        "the chain is otherwise valid: anchors national, host ok, not expired — only the pin failed"),
      refused.text)
    let line =
      try XCTUnwrap(
        String(contentsOfFile: proxy!.configFile, encoding: .utf8).split(
          separator: "\n", omittingEmptySubsequences: false
        )
        .firstIndex { $0.contains("pinnedPublicKeyHashes") }) + 1
    XCTAssertTrue(
      refused.text.contains(
        "add \(Self.leafPin) to pinnedPublicKeyHashes of rule pay.bank.example (\(proxy!.configFile):\(line)), then reload"
      ),
      refused.text)

    // The status line carries the code for clients that print only it.
    let raw = try Subprocess.run(
      "/usr/bin/curl", ["-s", "-i", "-x", "http://127.0.0.1:\(port)", "http://pay.bank.example/"])
    XCTAssertTrue(raw.stdout.hasPrefix("HTTP/1.1 502 Bad Gateway (pinproxy: pin-mismatch)\r\n"), raw.stdout)
    let python = try Subprocess.run(
      "/usr/bin/env",
      [
        "python3", "-c",
        """
        import sys, urllib.request, urllib.error
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:" + sys.argv[1]}))
        try:
            opener.open("http://pay.bank.example/", timeout=10)
        except urllib.error.HTTPError as error:
            print(error)
        """, String(port),
      ])
    XCTAssertEqual(
      python.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
      "HTTP Error 502: Bad Gateway (pinproxy: pin-mismatch)", python.stderr)

    // The page: the YAML line to paste behind one copy button, and the
    // anchor the reason names although the server did not send it.
    let page = try Curl.run(["http://\(admin)/"]).text
    let yaml = "pinnedPublicKeyHashes: [&quot;\(Self.strayPin)&quot;, &quot;\(Self.leafPin)&quot;]"
    XCTAssertTrue(page.contains("<code class=\"advice-yaml\">\(yaml)</code>"), page)
    XCTAssertTrue(page.contains("data-pin=\"\(yaml)\""), page)
    XCTAssertTrue(page.contains("<td>anchor (not sent)</td><td><code>CN=Pinproxy Test Root A"), page)
    XCTAssertTrue(page.contains("<td class=\"rule\"><code>pay.bank.example</code>"), page)
    XCTAssertTrue(page.contains("td.rule code{white-space:nowrap"), "the rule column does not wrap mid-word")

    // A summary listener keeps its one line.
    let summary = try get("http://pay.bank.example/", through: proxy!.ports["public"]!)
    XCTAssertTrue(
      summary.text.hasPrefix(
        "pinproxy: pin-mismatch: This site's certificate does not match what it is pinned to\nincident: "),
      summary.text)
    XCTAssertFalse(summary.text.contains("otherwise valid"), summary.text)
  }

  // MARK: 5 and 6. Diagnosis without openssl, and a reload that answers

  func testTheRotationWalkFromRefusalToServedWithoutARestart() throws {
    try start()
    let started = Date()
    assertRefused(try get("http://pay.bank.example/", through: port), 502, "pin-mismatch")
    // The chain the server presents, as PEM, ready for evaluate.
    let pem = try pinproxy(["pin", "--config", proxy!.configFile, "pay.bank.example:443", "--pem"])
    XCTAssertEqual(pem.status, 0, pem.stderr)
    XCTAssertEqual(pem.stdout.components(separatedBy: "-----BEGIN CERTIFICATE-----").count - 1, 2, pem.stdout)
    let chain = scratch + "/chain.pem"
    try pem.stdout.write(toFile: chain, atomically: true, encoding: .utf8)
    let before = try pinproxy(
      ["evaluate", "--config", proxy!.configFile, "--host", "pay.bank.example", "--chain", chain])
    XCTAssertEqual(before.status, 1)
    XCTAssertTrue(before.stdout.hasPrefix("rejected: pin-mismatch: "), before.stdout)
    let whatIf = try pinproxy([
      "evaluate", "--config", proxy!.configFile, "--host", "pay.bank.example", "--chain", chain, "--add-pin",
      Self.leafPin,
    ])
    XCTAssertEqual(whatIf.stdout, "trusted\n", whatIf.stderr)
    XCTAssertTrue(whatIf.stderr.contains("with \(Self.leafPin) added (not written to"), whatIf.stderr)

    // The fix, and a reload that says it took.
    try proxy!.rewrite(config: config(payPins: [Self.strayPin, Self.leafPin]))
    let reload = try pinproxy(["reload", "--admin", admin])
    XCTAssertEqual(reload.status, 0, reload.stderr)
    XCTAssertEqual(reload.stdout, "ok generation 2\n")
    let served = try get("http://pay.bank.example/", through: port)
    XCTAssertEqual(served.status, 200, "decided by the new policy at once: \(served.text)")
    print("rotation walk: \(String(format: "%.2f", Date().timeIntervalSince(started))) s")

    // A broken file: exit 1, the errors named, the running policy kept.
    try Data("domains: [{domain: pay.bank.example, pinningMode: publickey}]\n".utf8)
      .write(to: URL(fileURLWithPath: proxy!.configFile))
    let broken = try pinproxy(["reload", "--admin", admin])
    XCTAssertEqual(broken.status, 1)
    XCTAssertTrue(broken.stdout.hasPrefix("failed: generation 2 kept\n"), broken.stdout)
    XCTAssertTrue(broken.stdout.contains("did you mean publicKey?"), broken.stdout)
    XCTAssertEqual(try get("http://pay.bank.example/", through: port).status, 200)
    // GET is read-only.
    XCTAssertEqual(try Curl.run(["http://\(admin)/reload"]).status, 405)
  }

  /// With `admin.tokenFile`, a reload needs the token like every view.
  func testAReloadNeedsTheAdminTokenWhenOneIsSet() throws {
    let token = scratch + "/token"
    try "5f0c1d2e3b4a59687766554433221100aabbccddeeff\n".write(
      toFile: token, atomically: true, encoding: .utf8)
    proxy = try ProxyProcess(
      config: config().replacingOccurrences(
        of: #"admin: {address: "127.0.0.1:{port:admin}"}"#,
        with: #"admin: {address: "127.0.0.1:{port:admin}", tokenFile: "\#(token)"}"#),
      listeners: ["forward", "admin"])
    let refused = try pinproxy(["reload", "--admin", admin])
    XCTAssertEqual(refused.status, 1)
    XCTAssertTrue(refused.stderr.contains("answered 401"), refused.stderr)
    XCTAssertFalse(proxy!.log.contains("reload-ok"), proxy!.log)
    let reloaded = try pinproxy(["reload", "--admin", admin, "--token-file", token])
    XCTAssertEqual(reloaded.status, 0, reloaded.stderr)
    XCTAssertEqual(reloaded.stdout, "ok generation 2\n")
  }

  func testAReloadsWarningsAreShownByStatus() throws {
    try start()
    // A moved listener takes a restart: the reload says so.
    try proxy!.rewrite(
      config: config().replacingOccurrences(of: "name: forward,", with: "name: renamed,"))
    let reload = try pinproxy(["reload", "--admin", admin])
    XCTAssertEqual(reload.status, 0, reload.stderr)
    XCTAssertTrue(
      reload.stdout.contains("warning: listener addresses and modes change only with a restart"),
      reload.stdout)
    let status = try pinproxy(["status", "--admin", admin])
    XCTAssertTrue(status.stdout.contains("LAST RELOAD"), status.stdout)
    XCTAssertTrue(
      status.stdout.contains("  warning: listener addresses and modes change only with a restart"),
      status.stdout)
  }

  // MARK: 9. Small things

  func testAConfigurationWithoutListenersIsAnErrorForCheckAndRun() throws {
    let file = scratch + "/rules-only.yaml"
    try "defaults: {action: deny}\n".write(toFile: file, atomically: true, encoding: .utf8)
    let check = try pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2, check.stdout)
    XCTAssertTrue(check.stderr.contains("\(file): listeners: no listener is configured"), check.stderr)
    XCTAssertFalse(check.stdout.contains("ok"), check.stdout)
    let ready = scratch + "/ready"
    let run = try pinproxy(["run", "--config", file, "--ready-file", ready])
    XCTAssertEqual(run.status, 2, run.stderr)
    XCTAssertTrue(run.stderr.contains("\(file): listeners: no listener is configured"), run.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: ready))
  }

  func testTheLocalCALineIsSaidOnceAndAClientWithoutItGetsAHint() throws {
    try start()
    for generation in 2...3 {
      XCTAssertEqual(try pinproxy(["reload", "--admin", admin]).stdout, "ok generation \(generation)\n")
    }
    XCTAssertTrue(proxy!.child.wait(for: " local-ca "), proxy!.log)
    XCTAssertEqual(proxy!.completeLogLines.filter { $0.contains(" local-ca ") }.count, 1, proxy!.log)
    // curl without the local CA refuses the minted leaf (alert unknown ca).
    let untrusting = try Subprocess.run(
      "/usr/bin/curl",
      ["-s", "--max-time", "10", "-x", "http://127.0.0.1:\(port)", "https://api.bank.example/"])
    XCTAssertNotEqual(untrusting.status, 0)
    XCTAssertTrue(proxy!.child.wait(for: "does not trust pinproxy's local CA: install "), proxy!.log)
    XCTAssertTrue(proxy!.child.wait(for: "state/ca.pem in the client's trust store"), proxy!.log)
  }
}
