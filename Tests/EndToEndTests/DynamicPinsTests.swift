import Foundation
import PinTestSupport
import XCTest

/// Dynamic pinning end to end: the real binary, a real HTTPS list server
/// (Tests/Fixtures/pin_list_server.py) with a key made by `pinproxy pins
/// keygen` and lists signed by `pinproxy pins sign`, and real origins.
/// One scenario per test.
final class DynamicPinsTests: ProxyTestCase {
  var directory = ""
  var listServer: PinListServer?
  var publicKey = ""
  var signingKey: String { directory + "/signing.pem" }

  override func setUpWithError() throws {
    directory =
      FileManager.default.temporaryDirectory.appendingPathComponent("pins-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let keygen = try Subprocess.pinproxy(["pins", "keygen", "--key", signingKey])
    XCTAssertEqual(keygen.status, 0, keygen.stderr)
    XCTAssertTrue(FileManager.default.fileExists(atPath: signingKey + ".pub"))
    let line = keygen.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    XCTAssertTrue(line.hasPrefix("publicKey: \"B"), line)
    publicKey = String(line.dropFirst("publicKey: \"".count).dropLast())
    // Never overwrites a key.
    XCTAssertEqual(try Subprocess.pinproxy(["pins", "keygen", "--key", signingKey]).status, 2)
  }

  override func tearDown() {
    listServer?.stop()
    super.tearDown()
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// A signed v1 list of the given certificates, from `pinproxy pins sign`.
  func signedList(_ certificates: [String], expires: String = "+30d") throws -> String {
    let date = Int(Date().timeIntervalSince1970) + 30 * 86_400
    let result = try Subprocess.pinproxy(
      [
        "pins", "sign", "--key", signingKey, "--expires", expires == "+30d" ? String(date) : expires,
        "--list",
      ]
        + certificates.flatMap { ["--cert", $0] })
    XCTAssertEqual(result.status, 0, result.stderr)
    return result.stdout
  }

  func startListServer(challenge: Bool = false) throws -> PinListServer {
    let server = try PinListServer(directory: directory, challengeKey: challenge ? signingKey : nil)
    listServer = server
    return server
  }

  /// httpbin.org under a dynamic list from pins.httpbin.org (a rule of its own).
  func config(
    origin: Origin, listPort: Int, extraRule: String = "", report: String = "", useChallenge: Bool = false,
    admin: Bool = false
  ) -> String {
    """
    stateDirectory: "\(directory)/state"
    listeners:
      - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
    \(admin ? #"admin: {address: "127.0.0.1:{port:admin}"}"# : "")
    connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)", "pins.httpbin.org:443:127.0.0.1:\(listPort)"]
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    defaults: {action: deny}
    domains:
      - {domain: pins.httpbin.org, anchors: [test]}
      - domain: httpbin.org
        anchors: [test]
        \(extraRule)
        dynamicPins:
          url: https://pins.httpbin.org/list
          publicKey: "\(publicKey)"
          useChallenge: \(useChallenge)
          expectedCommonNames: [httpbin.org]
          updateInterval: 1s
        \(report)
    """
  }

  func startProxy(_ text: String, admin: Bool = false) throws -> ProxyProcess {
    let process = try ProxyProcess(config: text, listeners: ["forward"] + (admin ? ["admin"] : []))
    proxy = process
    return process
  }

  func waitForUpdates(_ process: ProxyProcess, count: Int = 1) {
    XCTAssertTrue(
      PinListServer.eventually {
        process.log.components(separatedBy: "dynamic-pins-updated").count - 1 >= count
      }, process.log)
  }

  /// Waits for the update that replaced an entry. Every fetch logs
  /// `dynamic-pins-updated`, an unchanged list too (`updateInterval: 1s`), so
  /// counting those lines could be satisfied by a refresh of the old list.
  func waitForRotation(_ process: ProxyProcess) {
    XCTAssertTrue(
      PinListServer.eventually {
        process.log.split(separator: "\n").contains {
          $0.contains("dynamic-pins-updated") && $0.contains("removed=1")
        }
      }, process.log)
  }

  func testFollowsARotationWithoutRestartAndDropsWithdrawnCertificates() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("httpbin.pem")]))
    var current = try origin()
    let port = current.port
    let process = try startProxy(config(origin: current, listPort: server.port))
    waitForUpdates(process)
    let before = try get("http://httpbin.org/hello", through: process.ports["forward"]!)
    XCTAssertEqual(before.status, 200, before.text)

    // The origin rotates to a new certificate; the list server publishes a
    // newly signed list naming only it.
    try LeafMint.mint(commonName: "httpbin.org", sans: ["httpbin.org"], name: "rotated", in: directory)
    try server.publish(try signedList([directory + "/rotated.pem"]))
    waitForRotation(process)
    current.stop()
    current = try Origin(
      certificate: directory + "/rotated-chain.pem", key: directory + "/rotated.key",
      arguments: ["--port", String(port)])
    origins.append(current)
    let after = try get("http://httpbin.org/hello", through: process.ports["forward"]!)
    XCTAssertEqual(after.status, 200, after.text + process.log)

    // The withdrawn certificate is refused at once: the verified list replaced the old one.
    current.stop()
    current = try Origin(
      certificate: Fixtures.path("httpbin-chain.pem"), key: Fixtures.path("httpbin.key"),
      arguments: ["--port", String(port)])
    origins.append(current)
    assertRefused(
      try get("http://httpbin.org/hello", through: process.ports["forward"]!), 502, "dynamic-pins-untrusted")
  }

  func testTamperedListIsRejectedAndTheStoredListStays() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("httpbin.pem")]))
    let process = try startProxy(
      config(origin: try origin(), listPort: server.port, admin: true), admin: true)
    waitForUpdates(process)
    // Same signature, another fingerprint: the one entry fails, so the whole update does.
    let good = try signedList([Fixtures.path("httpbin.pem")])
    let forged = good.replacingOccurrences(
      of: Fixtures.certificate("httpbin.pem").fingerprint.base64,
      with: Fixtures.certificate("adn.pem").fingerprint.base64)
    XCTAssertNotEqual(forged, good)
    try server.publish(forged)
    XCTAssertTrue(process.child.wait(for: "reason=signature"), process.log)
    XCTAssertTrue(process.child.wait(for: "dynamic-pins-update-failed"), process.log)
    let result = try get("http://httpbin.org/hello", through: process.ports["forward"]!)
    XCTAssertEqual(result.status, 200, result.text)
    let metrics = try Curl.run(["http://127.0.0.1:\(process.ports["admin"]!)/metrics"]).text
    XCTAssertTrue(
      metrics.contains(
        #"pinproxy_dynamic_pins_update_failures_total{rule="httpbin.org",reason="signature"}"#), metrics)
    XCTAssertTrue(metrics.contains(#"pinproxy_dynamic_pins_entries{rule="httpbin.org"} 1"#), metrics)
    XCTAssertTrue(
      metrics.contains("pinproxy_dynamic_pins_last_update_timestamp_seconds{rule=\"httpbin.org\"}"), metrics)
    let policies = try Curl.run(["http://127.0.0.1:\(process.ports["admin"]!)/policies"]).text
    XCTAssertTrue(policies.contains(Fixtures.certificate("httpbin.pem").fingerprint.base64), policies)
    XCTAssertTrue(policies.contains(#""source" : "fetched""#), policies)
  }

  func testALeafNotInTheListIsUntrustedAndAnEmptyStoreRefuses() throws {
    let server = try startListServer()
    try LeafMint.mint(commonName: "httpbin.org", sans: ["httpbin.org"], name: "other", in: directory)
    try server.publish(try signedList([directory + "/other.pem"]))
    let process = try startProxy(config(origin: try origin(), listPort: server.port))
    waitForUpdates(process)
    let refused = try get("http://httpbin.org/hello", through: process.ports["forward"]!)
    assertRefused(refused, 502, "dynamic-pins-untrusted")
    XCTAssertTrue(refused.text.contains("not in the dynamic pin list"), refused.text)
    process.stop()

    // No list server, nothing stored, no fallback: nothing can match.
    let empty = try startProxy(
      config(origin: origins[0], listPort: try OpenSSLServer.freePort()).replacingOccurrences(
        of: "\(directory)/state", with: "\(directory)/state-empty"))
    let result = try get("http://httpbin.org/hello", through: empty.ports["forward"]!)
    assertRefused(result, 502, "dynamic-pins-empty")
  }

  func testARestartWithTheListServerDownServesTheStoredList() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("httpbin.pem")]))
    let origin = try self.origin()
    let first = try startProxy(config(origin: origin, listPort: server.port))
    waitForUpdates(first)
    first.stop()
    server.stop()
    let second = try startProxy(config(origin: origin, listPort: server.port))
    XCTAssertTrue(second.child.wait(for: "dynamic-pins-update-failed"), second.log)
    let result = try get("http://httpbin.org/hello", through: second.ports["forward"]!)
    XCTAssertEqual(result.status, 200, result.text + second.log)
  }

  func testFallbackFileAppliesUntilAListIsFetched() throws {
    let fallback = directory + "/fallback.json"
    let expires = Int(Date().timeIntervalSince1970) + 86_400
    try Data(
      #"{"fingerprints":[{"name":"httpbin.org","fingerprint":"\#(Fixtures.certificate("httpbin.pem").fingerprint.base64)","expires":\#(expires)}]}"#
        .utf8
    ).write(to: URL(fileURLWithPath: fallback))
    var text = config(origin: try origin(), listPort: try OpenSSLServer.freePort())
    text = text.replacingOccurrences(
      of: "updateInterval: 1s", with: "updateInterval: 1s\n      fallback: \"\(fallback)\"")
    let process = try startProxy(text)
    let result = try get("http://httpbin.org/hello", through: process.ports["forward"]!)
    XCTAssertEqual(result.status, 200, result.text + process.log)
  }

  func testChallengeModeEndToEndAndRollbackRefused() throws {
    let server = try startListServer(challenge: true)
    let fingerprint = Fixtures.certificate("httpbin.pem").fingerprint.base64
    let expires = Int(Date().timeIntervalSince1970) + 30 * 86_400
    func body(_ timestamp: Int) -> String {
      #"{"timestamp":\#(timestamp),"fingerprints":[{"name":"httpbin.org","fingerprint":"\#(fingerprint)","expires":\#(expires)}]}"#
    }
    try server.publish(body(2_000_000_000))
    let process = try startProxy(config(origin: try origin(), listPort: server.port, useChallenge: true))
    waitForUpdates(process)
    let result = try get("http://httpbin.org/hello", through: process.ports["forward"]!)
    XCTAssertEqual(result.status, 200, result.text)
    // Each fetch sent a fresh 16-byte challenge.
    let challenges = server.requests.compactMap { $0.components(separatedBy: "challenge=").last }
    XCTAssertGreaterThanOrEqual(challenges.count, 1)
    XCTAssertEqual(challenges.first.flatMap { Data(base64Encoded: $0) }?.count, 16)
    // An older timestamp is a rollback: refused, the list stays.
    try server.publish(body(1_900_000_000))
    XCTAssertTrue(process.child.wait(for: "reason=rollback"), process.log)
    XCTAssertEqual(try get("http://httpbin.org/hello", through: process.ports["forward"]!).status, 200)
  }

  func testPinFailureIsReportedOnceInTrustKitFormatAndReportOnlyLetsThrough() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("httpbin.pem")]))
    let wrongPin = Fixtures.certificate("adn.pem").spkiPin
    let rule = """
      pinningMode: publicKey
          pinnedPublicKeyHashes: ["\(wrongPin)"]
      """
    let report = #"report: {uris: ["https://pins.httpbin.org/report"]}"#
    let origin = try self.origin()
    let process = try startProxy(
      config(origin: origin, listPort: server.port, extraRule: rule, report: report))
    waitForUpdates(process)
    for _ in 0..<3 {
      assertRefused(
        try get("http://httpbin.org/hello", through: process.ports["forward"]!), 502, "pin-mismatch")
    }
    XCTAssertTrue(PinListServer.eventually { server.reports.count >= 1 }, process.log)
    usleep(500_000)
    XCTAssertEqual(server.reports.count, 1, "repeats within 24 h are not reported again")
    let sent = try XCTUnwrap(server.reports.first)
    XCTAssertEqual(sent["hostname"] as? String, "httpbin.org")
    XCTAssertEqual(sent["port"] as? Int, 443)
    XCTAssertEqual(sent["noted-hostname"] as? String, "httpbin.org")
    XCTAssertEqual(sent["include-subdomains"] as? Bool, false)
    XCTAssertEqual(sent["enforce-pinning"] as? Bool, true)
    XCTAssertEqual(sent["validation-result"] as? Int, 1)
    XCTAssertEqual(sent["known-pins"] as? [String], ["pin-sha256=\"\(wrongPin.dropFirst("sha256/".count))\""])
    let chain = try XCTUnwrap(sent["validated-certificate-chain"] as? [String])
    XCTAssertEqual(chain.count, 2)
    XCTAssertTrue(chain[0].hasPrefix("-----BEGIN CERTIFICATE-----"))
    let date = try XCTUnwrap(sent["date-time"] as? String)
    XCTAssertNotNil(
      date.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"#, options: .regularExpression), date)
    for field in [
      "app-bundle-id", "app-version", "app-platform", "app-platform-version", "app-vendor-id",
      "trustkit-version",
    ] {
      XCTAssertNotNil(sent[field] as? String, field)
    }
    XCTAssertTrue(sent.keys.contains("known-pins-expiration-date"))
    process.stop()

    // Report-only: the same failure lets the request through, is logged as
    // one that would have been refused, and is reported with enforce-pinning false.
    let reportOnly = try startProxy(
      config(
        origin: origin, listPort: server.port, extraRule: rule,
        report: #"report: {enforce: false, uris: ["https://pins.httpbin.org/report"]}"#))
    waitForUpdates(reportOnly)
    let result = try get("http://httpbin.org/hello", through: reportOnly.ports["forward"]!)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertTrue(reportOnly.child.wait(for: "would have refused"), reportOnly.log)
    XCTAssertTrue(PinListServer.eventually { server.reports.count >= 2 }, reportOnly.log)
    XCTAssertEqual(server.reports.last?["enforce-pinning"] as? Bool, false)
    XCTAssertEqual(server.reports.last?["pinproxy-failure-code"] as? String, "pin-mismatch")
  }

  /// Behind a parent proxy the list fetches and the pin-failure reports go
  /// through it too (the list host's rule names the parent): a Squid that
  /// alone resolves the names, with no direct route to either server.
  func testTheListAndTheReportsGoThroughTheParent() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("httpbin.pem")]))
    let origin = try self.origin()
    let parent = try SquidParent(names: ["httpbin.org", "pins.httpbin.org", "bad.httpbin.org"])
    defer { parent.stop() }
    let wrongPin = Fixtures.certificate("adn.pem").spkiPin
    let process = try startProxy(
      """
      stateDirectory: "\(directory)/state"
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
      parentProxies:
        corp: {url: "http://127.0.0.1:\(parent.port)"}
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      defaults: {action: deny, parentProxy: corp}
      domains:
        - {domain: pins.httpbin.org, anchors: [test]}
        - domain: httpbin.org
          anchors: [test]
          dynamicPins:
            url: "https://pins.httpbin.org:\(server.port)/list"
            publicKey: "\(publicKey)"
            expectedCommonNames: [httpbin.org]
            updateInterval: 1s
        - domain: bad.httpbin.org
          anchors: [test]
          pinningMode: publicKey
          pinnedPublicKeyHashes: ["\(wrongPin)"]
          report: {uris: ["https://pins.httpbin.org:\(server.port)/report"]}
      """)
    waitForUpdates(process)
    // The list (fetched through the parent) pins the origin's leaf: served.
    XCTAssertEqual(
      try get("http://httpbin.org:\(origin.port)/hello", through: process.ports["forward"]!).status, 200)
    XCTAssertTrue(process.child.wait(for: "parent=corp"), process.log)
    // A pin failure of another rule is reported, through the parent as well.
    assertRefused(
      try get("http://bad.httpbin.org:\(origin.port)/hello", through: process.ports["forward"]!), 502,
      "pin-mismatch")
    XCTAssertTrue(PinListServer.eventually { server.reports.count >= 1 }, process.log)
    XCTAssertEqual(server.reports.first?["hostname"] as? String, "bad.httpbin.org")
    process.stop()
    XCTAssertTrue(
      parent.waitForConnects(to: "pins.httpbin.org:\(server.port)"),
      "the list came through the parent: \(parent.accessLog)")
    XCTAssertTrue(server.requests.contains { $0.contains("/list") }, "\(server.requests)")
  }

  func testReportOnlyStillRefusesABadChain() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("adn.pem")]))
    let process = try startProxy(
      config(
        origin: try origin("adn"), listPort: server.port,
        report: #"report: {enforce: false, uris: ["https://pins.httpbin.org/report"]}"#))
    waitForUpdates(process)
    // adn's chain does not lead to the test root: report-only waives pins, not the chain.
    assertRefused(
      try get("http://httpbin.org/hello", through: process.ports["forward"]!), 502, "untrusted-chain")
    XCTAssertFalse(process.log.contains("pin-failure-waived"), process.log)
  }

  func testPinsCommandsShowUpdateAndCheck() throws {
    let server = try startListServer()
    try server.publish(try signedList([Fixtures.path("httpbin.pem")]))
    let origin = try self.origin()
    let file = directory + "/pinproxy.yaml"
    let text = config(origin: origin, listPort: server.port).replacingOccurrences(
      of: "{port:forward}", with: String(try OpenSSLServer.freePort()))
    try Data(text.utf8).write(to: URL(fileURLWithPath: file))
    XCTAssertEqual(try Subprocess.pinproxy(["check", "--config", file]).status, 0)

    let update = try Subprocess.pinproxy(["pins", "update", "--config", file])
    XCTAssertEqual(update.status, 0, update.stdout + update.stderr)
    XCTAssertTrue(
      update.stdout.contains("httpbin.org: updated from https://pins.httpbin.org/list: 1 entries, +1 -0"),
      update.stdout)
    let show = try Subprocess.pinproxy(["pins", "show", "--config", file])
    XCTAssertEqual(show.status, 0)
    XCTAssertTrue(show.stdout.contains(Fixtures.certificate("httpbin.pem").fingerprint.base64), show.stdout)
    XCTAssertTrue(show.stdout.contains(#""source" : "stored""#), show.stdout)

    // evaluate --config uses the stored list.
    let trusted = try Subprocess.pinproxy([
      "evaluate", "--config", file, "--host", "httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem"),
    ])
    XCTAssertEqual(trusted.stdout, "trusted\n", trusted.stderr)
    let rejected = try Subprocess.pinproxy([
      "evaluate", "--config", file, "--host", "httpbin.org", "--chain", Fixtures.path("forged-chain.pem"),
    ])
    XCTAssertEqual(rejected.status, 1)

    try server.publish("{\"fingerprints\": 3}")
    let refused = try Subprocess.pinproxy(["pins", "update", "--config", file])
    XCTAssertEqual(refused.status, 1, refused.stdout)
    XCTAssertTrue(refused.stdout.contains("httpbin.org: refused: parse:"), refused.stdout)

    // A bad key is a config error naming the line.
    try Data(text.replacingOccurrences(of: publicKey, with: "BAAA").utf8).write(
      to: URL(fileURLWithPath: file))
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2)
    XCTAssertTrue(check.stderr.contains("\(file):") && check.stderr.contains("publicKey"), check.stderr)
  }

  func testSignPrintsAnEntryTheReferenceFormatVerifies() throws {
    let result = try Subprocess.pinproxy([
      "pins", "sign", "--key", signingKey, "--fingerprint",
      Fixtures.certificate("httpbin.pem").fingerprint.base64,
      "--name", "httpbin.org", "--expires", "2030-01-01",
    ])
    XCTAssertEqual(result.status, 0, result.stderr)
    let entry = try XCTUnwrap(
      JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    XCTAssertEqual(entry["name"] as? String, "httpbin.org")
    XCTAssertEqual(entry["expires"] as? Int, 1_893_456_000)
    // Verified independently with the openssl command line and the public key keygen wrote.
    let message = "httpbin.org&\(Fixtures.certificate("httpbin.pem").fingerprint.base64)&1893456000"
    try Data(message.utf8).write(to: URL(fileURLWithPath: directory + "/message"))
    try Data(base64Encoded: entry["signature"] as! String)!.write(
      to: URL(fileURLWithPath: directory + "/signature"))
    let verify = try Subprocess.run(
      "/usr/bin/env",
      [
        "openssl", "dgst", "-sha256", "-verify", signingKey + ".pub", "-signature", directory + "/signature",
        directory + "/message",
      ])
    XCTAssertEqual(
      verify.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "Verified OK", verify.stderr)
  }
}
