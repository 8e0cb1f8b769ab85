import Foundation
import PinTestSupport
import XCTest

/// Revocation end to end: the real binary, origins played by `openssl
/// s_server` (stapling with `-status_file`), CRLs from `openssl ca -gencrl`
/// and a distribution point and OCSP responder played by
/// Tests/Fixtures/revocation_server.py (which answers OCSP through `openssl
/// ocsp -index`), and curl. The PKI is Tests/Fixtures/make-revocation-pki.py.
final class RevocationTests: ProxyTestCase {
  var servers: [OpenSSLServer] = []
  var helpers: [ChildProcess] = []
  var directory = ""

  override func setUpWithError() throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("rev-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  override func tearDown() {
    servers.forEach { $0.stop() }
    helpers.forEach { $0.stop() }
    super.tearDown()
    try? FileManager.default.removeItem(atPath: directory)
  }

  static func pki(_ name: String) -> String { Fixtures.path("revocation/" + name) }

  /// An s_server origin for `leaf` (its chain up to the intermediate), stapling `staple` when given.
  func server(_ leaf: String, issuer: String = "intermediate", staple: String? = nil) throws -> OpenSSLServer
  {
    let server = try OpenSSLServer(
      certificate: Self.pki("\(leaf).pem"), key: Self.pki("\(leaf).key"), chain: Self.pki("\(issuer).pem"),
      extra: staple.map { ["-status_file", Self.pki($0)] } ?? [])
    servers.append(server)
    return server
  }

  /// revocation_server.py serving the fixture CRLs and OCSP for the
  /// intermediate; returns its port and its request log.
  /// `port`: a fixed one (the distribution points' own, 80), else one the kernel picks.
  func revocationServer(crlDirectory: String? = nil, port fixed: Int = 0) throws -> (port: Int, log: String) {
    let log = directory + "/revocation-\(helpers.count).log"
    let server = try ChildProcessLauncher.python(
      Fixtures.directory + "/revocation_server.py",
      [
        "--port", String(fixed), "--crl-dir", crlDirectory ?? Self.pki(""), "--ocsp-index",
        Self.pki("index.txt"),
        "--ocsp-ca", Self.pki("intermediate.pem"), "--ocsp-signer", Self.pki("intermediate.pem"),
        "--ocsp-key",
        Self.pki("intermediate.key"), "--log", log,
      ])
    helpers.append(server)
    XCTAssertTrue(server.wait(for: "READY "), server.currentOutput)
    let port = server.currentOutput.split(separator: "\n").first { $0.hasPrefix("READY ") }
      .flatMap { Int(String($0.dropFirst(6)).trimmingCharacters(in: .whitespaces)) }
    return (try XCTUnwrap(port), log)
  }

  /// A forward proxy with anchor set `rev` (the revocation root and its
  /// CRLs), `hosts` mapped to origins, the CRL and OCSP hosts to `fetchPort`,
  /// and one rule per host with `revocation`.
  func startProxy(
    _ hosts: [String: Int], revocation: String = "{}", crls: [String] = [], fetchPort: Int? = nil,
    top: String = "", names: [String] = [], anchorFiles: [String] = [RevocationTests.pki("root.pem")]
  ) throws -> Int {
    var connectTo = hosts.map { "\"\($0.key).revocation.test:443:127.0.0.1:\($0.value)\"" }
    if let fetchPort {
      connectTo += [
        "\"crl.revocation.test:80:127.0.0.1:\(fetchPort)\"",
        "\"ocsp.revocation.test:80:127.0.0.1:\(fetchPort)\"",
      ]
    }
    let rules = hosts.keys.map {
      "  - {domain: \($0).revocation.test, anchors: [rev], revocation: \(revocation)}"
    }.joined(separator: "\n")
    let config = """
      \(top)
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: [\(connectTo.joined(separator: ", "))]
      anchorSets:
        rev: {files: [\(anchorFiles.map { "\"\($0)\"" }.joined(separator: ", "))], crls: [\(crls.map { "\"\($0)\"" }.joined(separator: ", "))]}
      defaults: {action: deny}
      domains:
      \(rules)
      """
    let process = try ProxyProcess(config: config, listeners: ["forward"] + names)
    proxy = process
    return process.ports["forward"]!
  }

  func fetch(_ host: String, through port: Int) throws -> CurlResult {
    try get("http://\(host).revocation.test/", through: port)
  }

  func testARevokedStapleRefusesWithoutAnyRevocationSetting() throws {
    let good = try server("good", staple: "ocsp-good.der")
    var port = try startProxy(["good": good.port])
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    proxy!.stop()
    let revoked = try server("good", staple: "ocsp-revoked-for-good.der")
    port = try startProxy(["good": revoked.port])
    let refused = try fetch("good", through: port)
    assertRefused(refused, 502, "revoked")
    XCTAssertTrue(refused.text.contains("keyCompromise"), refused.text)
    XCTAssertTrue(proxy!.child.wait(for: "code=revoked"), proxy!.log)
  }

  func testAStapleThatDoesNotVerifyIsIgnoredUnlessTheRuleRequiresOne() throws {
    let wrong = try server("good", staple: "ocsp-wrong-signer.der")
    var port = try startProxy(["good": wrong.port])
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    proxy!.stop()
    port = try startProxy(["good": wrong.port], revocation: "{stapledOCSP: require}")
    assertRefused(try fetch("good", through: port), 502, "revocation-unknown")
    proxy!.stop()
    let other = try server("good", staple: "ocsp-other-cert.der")
    port = try startProxy(["good": other.port], revocation: "{stapledOCSP: require}")
    assertRefused(try fetch("good", through: port), 502, "revocation-unknown")
  }

  func testAMustStapleLeafNeedsAGoodStaple() throws {
    let bare = try server("muststaple")
    var port = try startProxy(["muststaple": bare.port])
    let refused = try fetch("muststaple", through: port)
    assertRefused(refused, 502, "revocation-unknown")
    XCTAssertTrue(refused.text.contains("RFC 7633"), refused.text)
    proxy!.stop()
    let stapled = try server("muststaple", staple: "ocsp-muststaple-good.der")
    port = try startProxy(["muststaple": stapled.port])
    XCTAssertEqual(try fetch("muststaple", through: port).status, 200, proxy!.log)
    // The resumed handshake carries no staple; the one kept with the session decides.
    XCTAssertEqual(try fetch("muststaple", through: port).status, 200, proxy!.log)
    XCTAssertTrue(proxy!.child.wait(for: "upstream_tls=resumed"), proxy!.log)
  }

  func testAnAnchorSetCRLRevokesALeafAndAnIntermediate() throws {
    let good = try server("good")
    let revoked = try server("revoked")
    let underRevoked = try server("under-revoked", issuer: "revoked-intermediate")
    let port = try startProxy(
      ["good": good.port, "revoked": revoked.port, "under-revoked": underRevoked.port],
      crls: [Self.pki("intermediate.crl.pem"), Self.pki("root.crl")])
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
    let intermediate = try fetch("under-revoked", through: port)
    assertRefused(intermediate, 502, "revoked")
    XCTAssertTrue(intermediate.text.contains("Revoked Intermediate"), intermediate.text)
  }

  func testABadAnchorSetCRLIsRefusedByCheckNamingFileKeyAndDefect() throws {
    let config = directory + "/bad.yaml"
    for (file, defect) in [
      ("intermediate-nonumber.crl", "no CRLNumber"), ("intermediate-critical-number.crl", "critical"),
      ("intermediate-expired.crl", "expired"),
    ] {
      try """
      anchorSets:
        rev:
          files: ["\(Self.pki("root.pem"))"]
          crls: ["\(Self.pki(file))"]
      """.write(toFile: config, atomically: true, encoding: .utf8)
      let result = try Subprocess.pinproxy(["check", "--config", config])
      XCTAssertEqual(result.status, 2, result.stdout + result.stderr)
      XCTAssertTrue(result.stderr.contains(file) && result.stderr.contains(defect), result.stderr)
      XCTAssertTrue(result.stderr.contains("crls"), result.stderr)
    }
  }

  func testACRLUpdateRevokesALeafWhoseVerdictIsCached() throws {
    let crl = directory + "/intermediate.crl"
    try FileManager.default.copyItem(atPath: Self.pki("intermediate-empty.crl"), toPath: crl)
    let revoked = try server("revoked")
    let port = try startProxy(["revoked": revoked.port], crls: [crl])
    XCTAssertEqual(try fetch("revoked", through: port).status, 200, proxy!.log)
    XCTAssertEqual(try fetch("revoked", through: port).status, 200, proxy!.log)
    try FileManager.default.removeItem(atPath: crl)
    try FileManager.default.copyItem(atPath: Self.pki("intermediate.crl"), toPath: crl)
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
  }

  func testDistributionPointsAreFetchedOnceAndRequireRefusesWithoutOne() throws {
    let responder = try revocationServer()
    let good = try server("good")
    let revoked = try server("revoked")
    let port = try startProxy(
      ["good": good.port, "revoked": revoked.port], revocation: "{crl: require}", fetchPort: responder.port)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
    let log = try String(contentsOfFile: responder.log, encoding: .utf8)
    XCTAssertEqual(log.components(separatedBy: "GET /intermediate.crl").count - 1, 1, log)
    XCTAssertEqual(log.components(separatedBy: "GET /root.crl").count - 1, 1, log)
  }

  /// Behind a parent proxy, the distribution points are fetched through it
  /// too (`defaults.parentProxy`: their host is under no rule), the parent
  /// resolving their names; nothing is reachable directly. The responder
  /// listens on the points' own port, 80 (this test runs alone).
  func testDistributionPointsAreFetchedThroughTheParent() throws {
    let responder = try revocationServer(port: 80)
    let good = try server("good")
    let revoked = try server("revoked")
    let parent = try SquidParent(names: [
      "crl.revocation.test", "ocsp.revocation.test", "good.revocation.test", "revoked.revocation.test",
    ])
    defer { parent.stop() }
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [\(good.port), \(revoked.port)]}
        parentProxies:
          corp: {url: "http://127.0.0.1:\(parent.port)"}
        anchorSets:
          rev: {files: ["\(Self.pki("root.pem"))"]}
        defaults: {action: deny, parentProxy: corp}
        domains:
          - {domain: good.revocation.test, anchors: [rev], revocation: {crl: require}}
          - {domain: revoked.revocation.test, anchors: [rev], revocation: {crl: require}}
        """, listeners: ["forward"])
    proxy = process
    let port = process.ports["forward"]!
    XCTAssertEqual(
      try get("http://good.revocation.test:\(good.port)/", through: port).status, 200, process.log)
    assertRefused(try get("http://revoked.revocation.test:\(revoked.port)/", through: port), 502, "revoked")
    let log = try String(contentsOfFile: responder.log, encoding: .utf8)
    XCTAssertEqual(log.components(separatedBy: "GET /intermediate.crl").count - 1, 1, log)
    process.stop()
    XCTAssertTrue(
      parent.waitForConnects(to: "crl.revocation.test:80"), "through the parent: \(parent.accessLog)")
  }

  func testADistributionPointThatIsDownSlowOrGarbage() throws {
    let other = try server("other-cdp")
    let responder = try revocationServer()
    var port = try startProxy(
      ["other-cdp": other.port], revocation: "{crl: require}", fetchPort: responder.port)
    let missing = try fetch("other-cdp", through: port)
    assertRefused(missing, 502, "revocation-unknown")
    XCTAssertTrue(missing.text.contains("missing.crl"), missing.text)
    proxy!.stop()
    port = try startProxy(
      ["other-cdp": other.port], revocation: "{crl: ifAvailable}", fetchPort: responder.port)
    XCTAssertEqual(try fetch("other-cdp", through: port).status, 200, proxy!.log)
    proxy!.stop()
    // Down: nothing listens where the distribution point's name leads.
    let down = try server("good")
    let closed = try OpenSSLServer.closedPort()
    port = try startProxy(["good": down.port], revocation: "{crl: require}", fetchPort: closed)
    let refused = try fetch("good", through: port)
    assertRefused(refused, 502, "revocation-unknown")
    XCTAssertTrue(refused.text.contains("intermediate.crl"), refused.text)
    proxy!.stop()
    port = try startProxy(["good": down.port], revocation: "{crl: ifAvailable}", fetchPort: closed)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    proxy!.stop()
    // Garbage does not decode; a slow server meets the 5 s bound; a 64 MiB
    // body is cut at the 32 MiB a CRL may have, where it is read.
    for (mode, why) in [
      ("garbage", "not a CRL"), ("slow", "within 5.0 s"), ("huge", "larger than 33554432 bytes"),
    ] {
      let good = try server("good")
      _ = try Curl.run(["http://127.0.0.1:\(responder.port)/_mode/\(mode)"])
      port = try startProxy(["good": good.port], revocation: "{crl: require}", fetchPort: responder.port)
      let started = Date()
      let refused = try fetch("good", through: port)
      assertRefused(refused, 502, "revocation-unknown")
      XCTAssertTrue(refused.text.contains(why), "\(mode): \(refused.text)")
      XCTAssertLessThan(Date().timeIntervalSince(started), 20, mode)
      proxy!.stop()
    }
  }

  func testOCSPQueriesHardAndSoftFail() throws {
    let responder = try revocationServer()
    let good = try server("good")
    let revoked = try server("revoked")
    var port = try startProxy(
      ["good": good.port, "revoked": revoked.port], revocation: "{ocsp: hardFail}", fetchPort: responder.port)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    let log = try String(contentsOfFile: responder.log, encoding: .utf8)
    XCTAssertEqual(log.split(separator: "\n").filter { $0.hasPrefix("GET /M") }.count, 2, log)
    proxy!.stop()
    let closed = try OpenSSLServer.closedPort()
    port = try startProxy(["good": good.port], revocation: "{ocsp: hardFail}", fetchPort: closed)
    assertRefused(try fetch("good", through: port), 502, "revocation-unknown")
    proxy!.stop()
    port = try startProxy(["good": good.port], revocation: "{ocsp: softFail}", fetchPort: closed)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
  }

  func testACRLThatDoesNotVerifyUnderTheIssuerRefusesWhatItCovers() throws {
    let good = try server("good")
    var port = try startProxy(["good": good.port], crls: [Self.pki("intermediate-wrongkey.crl")])
    let wrongKey = try fetch("good", through: port)
    assertRefused(wrongKey, 502, "revocation-unknown")
    XCTAssertTrue(wrongKey.text.contains("signature does not verify"), wrongKey.text)
    proxy!.stop()
    let underNoCRLSign = try server("under-nocrlsign", issuer: "nocrlsign-intermediate")
    port = try startProxy(["under-nocrlsign": underNoCRLSign.port], crls: [Self.pki("nocrlsign.crl")])
    let noCRLSign = try fetch("under-nocrlsign", through: port)
    assertRefused(noCRLSign, 502, "revocation-unknown")
    XCTAssertTrue(noCRLSign.text.contains("cRLSign"), noCRLSign.text)
  }

  func testExpiredAndDelegatedStaples() throws {
    let expired = try server("good", staple: "ocsp-expired.der")
    var port = try startProxy(["good": expired.port])
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    proxy!.stop()
    port = try startProxy(["good": expired.port], revocation: "{stapledOCSP: require}")
    let stale = try fetch("good", through: port)
    assertRefused(stale, 502, "revocation-unknown")
    XCTAssertTrue(stale.text.contains("nextUpdate"), stale.text)
    proxy!.stop()
    let delegated = try server("good", staple: "ocsp-good-delegated.der")
    port = try startProxy(["good": delegated.port], revocation: "{stapledOCSP: require}")
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    proxy!.stop()
    let bogus = try server("good", staple: "ocsp-bogus-responder.der")
    port = try startProxy(["good": bogus.port], revocation: "{stapledOCSP: require}")
    let notDelegated = try fetch("good", through: port)
    assertRefused(notDelegated, 502, "revocation-unknown")
    XCTAssertTrue(notDelegated.text.contains("id-kp-OCSPSigning"), notDelegated.text)
  }

  func testABadCRLOnReloadKeepsTheRunningState() throws {
    let revoked = try server("revoked")
    let port = try startProxy(["revoked": revoked.port], crls: [Self.pki("intermediate.crl")])
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
    let config = try String(contentsOfFile: proxy!.configFile, encoding: .utf8)
    try proxy!.rewrite(
      config: config.replacingOccurrences(of: "intermediate.crl", with: "intermediate-nonumber.crl"))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-failed"), proxy!.log)
    // The error's own line follows the summary: waited for, not assumed written.
    XCTAssertTrue(proxy!.child.wait(for: "intermediate-nonumber.crl"), proxy!.log)
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
  }

  /// What distribution points gave is kept in the state directory: after a
  /// restart with the distribution point gone, `crl: require` still decides.
  func testFetchedCRLsSurviveARestart() throws {
    let responder = try revocationServer()
    let good = try server("good")
    let revoked = try server("revoked")
    let state = directory + "/state"
    let top = "stateDirectory: \"\(state)\""
    var port = try startProxy(
      ["good": good.port, "revoked": revoked.port], revocation: "{crl: require}", fetchPort: responder.port,
      top: top)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    proxy!.stop()
    helpers.forEach { $0.stop() }
    let closed = try OpenSSLServer.closedPort()
    port = try startProxy(
      ["good": good.port, "revoked": revoked.port], revocation: "{crl: require}", fetchPort: closed, top: top)
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    assertRefused(try fetch("revoked", through: port), 502, "revoked")
  }

  /// `/metrics` counts the evidence examined; `/policies` shows each rule's
  /// settings and each CRL's issuer, age and next update.
  func testMetricsAndPoliciesShowRevocation() throws {
    let good = try server("good", staple: "ocsp-good.der")
    let port = try startProxy(
      ["good": good.port], revocation: "{crl: off, ocsp: off, stapledOCSP: require}",
      crls: [Self.pki("intermediate.crl")], top: "admin: {address: \"127.0.0.1:{port:admin}\"}",
      names: ["admin"])
    XCTAssertEqual(try fetch("good", through: port).status, 200, proxy!.log)
    let admin = proxy!.ports["admin"]!
    let metrics = try Curl.run(["http://127.0.0.1:\(admin)/metrics"]).text
    XCTAssertTrue(
      metrics.contains("pinproxy_revocation_checks_total{source=\"staple\",result=\"good\"} 1"), metrics)
    XCTAssertTrue(
      metrics.contains("pinproxy_revocation_checks_total{source=\"crl\",result=\"good\"} 1"), metrics)
    let policies = try Curl.run(["http://127.0.0.1:\(admin)/policies"]).text
    let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(policies.utf8)) as? [String: Any])
    let rule = try XCTUnwrap((json["domains"] as? [[String: Any]])?.first)
    XCTAssertEqual(
      rule["revocation"] as? [String: String], ["crl": "off", "ocsp": "off", "stapledOCSP": "require"])
    let crl = try XCTUnwrap((json["crls"] as? [[String: Any]])?.first)
    XCTAssertEqual(crl["anchorSet"] as? String, "rev")
    XCTAssertEqual(crl["nextUpdate"] as? String, "2035-01-01T00:00:00Z")
    XCTAssertTrue((crl["issuer"] as? String)?.contains("Revocation Test Intermediate") == true, policies)
    XCTAssertNotNil(crl["ageSeconds"] as? Int)
  }

  /// An indirect CRL (RFC 5280 §5.2.5): from a CRL issuer the root
  /// certified, naming the intermediate in its entry. Supplied with its
  /// issuer's certificate in the file, and fetched from the distribution
  /// point with the issuer's certificate in the anchor set.
  func testIndirectCRLs() throws {
    let good = try server("indirect-good")
    let revoked = try server("indirect-revoked")
    var port = try startProxy(
      ["indirect-good": good.port, "indirect-revoked": revoked.port], crls: [Self.pki("indirect.crl.pem")])
    XCTAssertEqual(try fetch("indirect-good", through: port).status, 200, proxy!.log)
    assertRefused(try fetch("indirect-revoked", through: port), 502, "revoked")
    proxy!.stop()
    let responder = try revocationServer()
    port = try startProxy(
      ["indirect-good": good.port, "indirect-revoked": revoked.port], revocation: "{crl: require}",
      fetchPort: responder.port, anchorFiles: [Self.pki("root.pem"), Self.pki("crl-issuer.pem")])
    XCTAssertEqual(try fetch("indirect-good", through: port).status, 200, proxy!.log)
    assertRefused(try fetch("indirect-revoked", through: port), 502, "revoked")
  }

  /// A chain accepted only because the rule allows invalid certificates
  /// (its pin matched) never sends the proxy to the URLs it names.
  func testAnUnverifiedChainSendsNoFetch() throws {
    let pin = try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "openssl x509 -pubkey -noout -in '\(Self.pki("good.pem"))' | openssl pkey -pubin -outform der"
          + " | openssl dgst -sha256 -binary | base64",
      ])
    let responder = try revocationServer()
    let good = try server("good")
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["good.revocation.test:443:127.0.0.1:\(good.port)", "crl.revocation.test:80:127.0.0.1:\(responder.port)"]
      defaults: {action: deny}
      domains:
        - domain: good.revocation.test
          pinningMode: publicKey
          allowInvalidCertificates: true
          pinnedPublicKeyHashes: ["sha256/\(pin.stdout.trimmingCharacters(in: .whitespacesAndNewlines))"]
          revocation: {crl: ifAvailable}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    XCTAssertEqual(try fetch("good", through: proxy!.ports["forward"]!).status, 200, proxy!.log)
    let log = (try? String(contentsOfFile: responder.log, encoding: .utf8)) ?? ""
    XCTAssertFalse(log.contains("GET"), log)
  }
}
