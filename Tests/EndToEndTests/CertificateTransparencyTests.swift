import Foundation
import PinTestSupport
import XCTest

/// `requiresCertificateTransparency` end to end: the real binary, origins
/// played by `openssl s_server` sending SCTs in the TLS extension
/// (`-serverinfo`), in a stapled OCSP response (`-status_file`), or serving
/// a certificate with SCTs embedded, and curl.
/// The SCTs and the log list come from Tests/Fixtures/make-ct-fixtures.py.
final class CertificateTransparencyTests: ProxyTestCase {
  var directory = ""
  var servers: [OpenSSLServer] = []

  override func setUpWithError() throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("ct-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  override func tearDown() {
    servers.forEach { $0.stop() }
    super.tearDown()
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// An s_server origin with the httpbin chain and, when given, these SCTs
  /// in the TLS extension.
  func origin(scts: [[UInt8]]?, tls: String = "", extra more: [String] = [], embedded: String? = nil) throws
    -> OpenSSLServer
  {
    var extra = (tls.isEmpty ? [] : [tls]) + more
    if let scts {
      let file = try SCTFixtures.write(
        Array(SCTFixtures.serverInfo(scts).utf8), named: "info-\(servers.count).pem", in: directory)
      extra += ["-serverinfo", file]
    }
    let server: OpenSSLServer
    if let embedded {
      server = try OpenSSLServer(
        certificate: SCTFixtures.path("\(embedded).pem"), key: SCTFixtures.path("\(embedded).key"),
        chain: Fixtures.path("int-a.pem"), extra: extra)
    } else {
      server = try OpenSSLServer(
        certificate: Fixtures.path("httpbin.pem"), key: Fixtures.path("httpbin.key"),
        chain: Fixtures.path("int-a.pem"), extra: extra)
    }
    servers.append(server)
    return server
  }

  /// ct.httpbin.org requires transparency; plain.httpbin.org does not.
  func startProxy(_ server: OpenSSLServer, minimum: Int = 2) throws -> Int {
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["ct.httpbin.org:443:127.0.0.1:\(server.port)", "plain.httpbin.org:443:127.0.0.1:\(server.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      certificateTransparency: {logList: "\(SCTFixtures.logList)", minimumSCTs: \(minimum)}
      defaults: {action: deny}
      domains:
        - {domain: ct.httpbin.org, anchors: [test], requiresCertificateTransparency: true}
        - {domain: plain.httpbin.org, anchors: [test]}
      """
    let process = try ProxyProcess(config: config, listeners: ["forward"])
    proxy = process
    return process.ports["forward"]!
  }

  func testTwoSCTsInTheTLSExtensionAreAcceptedOverTLS12AndTLS13() throws {
    for version in ["-tls1_2", "-tls1_3"] {
      let port = try startProxy(try origin(scts: [SCTFixtures.sct("a"), SCTFixtures.sct("b")], tls: version))
      let result = try get("http://ct.httpbin.org/", through: port)
      XCTAssertEqual(result.status, 200, version + " " + result.text + (proxy?.log ?? ""))
      proxy?.stop()
    }
  }

  func testOneSCTIsRefusedWithCtRequiredNamingTheLog() throws {
    let port = try startProxy(try origin(scts: [SCTFixtures.sct("a")]))
    let result = try get("http://ct.httpbin.org/", through: port)
    assertRefused(result, 502, "ct-required")
    XCTAssertTrue(result.text.contains("found 1 (\"Pinproxy Test Log A\")"), result.text)
    // The same origin under a rule without the requirement is fine.
    XCTAssertEqual(try get("http://plain.httpbin.org/", through: port).status, 200)
  }

  func testNoSCTsAreRefusedAndTheRefusalSaysNoneWasPresented() throws {
    let port = try startProxy(try origin(scts: nil))
    let result = try get("http://ct.httpbin.org/", through: port)
    assertRefused(result, 502, "ct-required")
    XCTAssertTrue(result.text.contains("the server presented no SCT"), result.text)
  }

  func testUnknownLogsAndBadSignaturesDoNotCount() throws {
    let port = try startProxy(
      try origin(scts: [SCTFixtures.sct("a"), SCTFixtures.sct("unknown"), SCTFixtures.tampered("b")]))
    let result = try get("http://ct.httpbin.org/", through: port)
    assertRefused(result, 502, "ct-required")
    XCTAssertTrue(result.text.contains("from a log not in the log list"), result.text)
    XCTAssertTrue(result.text.contains("its signature does not verify"), result.text)
  }

  func testEmbeddedSCTsAreCountedOnEveryHandshake() throws {
    let port = try startProxy(try origin(scts: nil, embedded: "embedded-ab"))
    for _ in 0..<3 {
      let result = try get("http://ct.httpbin.org/", through: port)
      XCTAssertEqual(result.status, 200, result.text + (proxy?.log ?? ""))
    }
  }

  func testOneEmbeddedSCTWithOneInTheExtensionIsNotEnoughWhenTheyCoverDifferentCertificates() throws {
    // Log B's SCT is over the httpbin leaf, not this one: only A counts.
    let port = try startProxy(try origin(scts: [SCTFixtures.sct("b")], embedded: "embedded-a"))
    assertRefused(try get("http://ct.httpbin.org/", through: port), 502, "ct-required")
  }

  /// An OCSP response for the httpbin leaf, signed by intermediate A,
  /// carrying these SCTs (Tests/Fixtures/ocsp_staple.py), for `-status_file`.
  func staple(_ scts: [[UInt8]]) throws -> String {
    let list = try SCTFixtures.write(
      SCTFixtures.list(scts), named: "staple-\(servers.count).bin", in: directory)
    let out = directory + "/staple-\(servers.count).der"
    let made = try Subprocess.run(
      "/usr/bin/python3",
      [
        Fixtures.directory + "/ocsp_staple.py", Fixtures.path("httpbin.der"), Fixtures.path("int-a.der"),
        Fixtures.path("int-a.key"), list, out,
      ])
    XCTAssertEqual(made.status, 0, made.stderr)
    return out
  }

  func testSCTsInAStapledOCSPResponseCount() throws {
    let both = try staple([SCTFixtures.sct("a"), SCTFixtures.sct("b")])
    var port = try startProxy(try origin(scts: nil, tls: "-status_file", extra: [both]))
    XCTAssertEqual(try get("http://ct.httpbin.org/", through: port).status, 200, proxy?.log ?? "")
    proxy?.stop()
    let one = try staple([SCTFixtures.sct("a")])
    port = try startProxy(try origin(scts: nil, tls: "-status_file", extra: [one]))
    let refused = try get("http://ct.httpbin.org/", through: port)
    assertRefused(refused, 502, "ct-required")
    XCTAssertTrue(refused.text.contains("found 1 (\"Pinproxy Test Log A\")"), refused.text)
  }

  func testEvaluateDecidesOfflineWithSCTFiles() throws {
    let two = try SCTFixtures.write(
      Array(SCTFixtures.serverInfo([SCTFixtures.sct("a"), SCTFixtures.sct("b")]).utf8), named: "two.pem",
      in: directory)
    let one = try SCTFixtures.write(SCTFixtures.list([SCTFixtures.sct("a")]), named: "one.bin", in: directory)
    let base = [
      "evaluate", "--host", "ct.httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem"), "--anchors",
      Fixtures.path("root-a.pem"), "--ct-log-list", SCTFixtures.logList, "--at", "2026-06-01T00:00:00Z",
    ]
    let trusted = try Subprocess.pinproxy(base + ["--sct-file", two])
    XCTAssertEqual(trusted.status, 0, trusted.stderr)
    XCTAssertEqual(trusted.stdout, "trusted\n")
    let refused = try Subprocess.pinproxy(base + ["--sct-file", one])
    XCTAssertEqual(refused.status, 1)
    XCTAssertTrue(refused.stdout.hasPrefix("rejected: ct-required: "), refused.stdout)
    let lowered = try Subprocess.pinproxy(base + ["--sct-file", one, "--minimum-scts", "1"])
    XCTAssertEqual(lowered.status, 0, lowered.stdout)
    // Through a configuration: the rule's requirement and the configured list.
    let config = directory + "/ct.yaml"
    try """
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    certificateTransparency: {logList: "\(SCTFixtures.logList)"}
    domains:
      - {domain: ct.httpbin.org, anchors: [test], requiresCertificateTransparency: true}
    """.write(toFile: config, atomically: true, encoding: .utf8)
    let fromConfig = [
      "evaluate", "--host", "ct.httpbin.org", "--config", config, "--at", "2026-06-01T00:00:00Z",
    ]
    let embedded = try Subprocess.pinproxy(
      fromConfig + ["--chain", SCTFixtures.path("embedded-ab-chain.pem")])
    XCTAssertEqual(embedded.stdout, "trusted\n", embedded.stderr)
    let none = try Subprocess.pinproxy(fromConfig + ["--chain", Fixtures.path("httpbin-chain.pem")])
    XCTAssertTrue(none.stdout.hasPrefix("rejected: ct-required: "), none.stdout)
  }

  func testARuleRequiringTransparencyWithoutALogListIsAConfigError() throws {
    let config = directory + "/bad.yaml"
    try """
    domains:
      - domain: ct.httpbin.org
        requiresCertificateTransparency: true
    """.write(toFile: config, atomically: true, encoding: .utf8)
    let result = try Subprocess.pinproxy(["check", "--config", config])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(
      result.stderr.contains("\(config):3:")
        && result.stderr.contains("domains[0].requiresCertificateTransparency"), result.stderr)
    XCTAssertTrue(result.stderr.contains("needs the top-level certificateTransparency"), result.stderr)
  }
}
