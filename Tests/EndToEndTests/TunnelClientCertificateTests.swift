import Foundation
import PinTestSupport
import XCTest

/// Tunnel listeners with `downstreamTLS` and `downstreamClientCA`: a client
/// certificate from that CA is required, and `allowedClientNames` narrows
/// which. Certificates are made per test by the openssl command line; the
/// clients are curl (`--cert`) and `openssl s_client`.
final class TunnelClientCertificateTests: ProxyTestCase {
  var pki = ""

  override func setUpWithError() throws {
    pki =
      FileManager.default.temporaryDirectory.appendingPathComponent("client-pki-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: pki, withIntermediateDirectories: true)
    try makeCA("ca", "Client CA")
    try makeCA("other-ca", "Other CA")
    try makeClient("pos", cn: "pos-terminal-1", issuer: "ca", san: "URI:spiffe://shop.example/pos/1")
    try makeClient("intruder", cn: "intruder", issuer: "ca", san: "DNS:intruder.example")
    try makeClient("foreign", cn: "pos-terminal-1", issuer: "other-ca", san: "DNS:foreign.example")
  }

  override func tearDown() {
    super.tearDown()
    try? FileManager.default.removeItem(atPath: pki)
  }

  private func openssl(_ arguments: [String]) throws {
    let result = try Subprocess.run("/usr/bin/openssl", arguments, in: pki)
    guard result.status == 0 else { throw HarnessError("openssl \(arguments.first ?? ""): \(result.stderr)") }
  }

  private func makeCA(_ name: String, _ cn: String) throws {
    try openssl([
      "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
      "\(name).key",
      "-out", "\(name).pem", "-subj", "/CN=\(cn)", "-days", "30", "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    ])
  }

  private func makeClient(_ name: String, cn: String, issuer: String, san: String) throws {
    try openssl([
      "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(name).key",
      "-out",
      "\(name).csr", "-subj", "/CN=\(cn)",
    ])
    try Data("extendedKeyUsage=clientAuth\nsubjectAltName=\(san)\n".utf8).write(
      to: URL(fileURLWithPath: "\(pki)/\(name).ext"))
    try openssl([
      "x509", "-req", "-in", "\(name).csr", "-CA", "\(issuer).pem", "-CAkey", "\(issuer).key",
      "-CAcreateserial",
      "-out", "\(name).pem", "-days", "10", "-extfile", "\(name).ext",
    ])
  }

  /// A tunnel listener to httpbin.org requiring client certificates of `ca`.
  private func startTunnel(names: String?, origin: Origin? = nil, closedUpstream: Int? = nil) throws -> Int {
    let allowed = names.map { ", allowedClientNames: \($0)" } ?? ""
    _ = try startProxy(
      map: origin.map { ["httpbin.org": $0] } ?? [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      listeners: """
          - {name: secure, address: "127.0.0.1:{port:secure}", mode: tunnel, upstream: "httpbin.org:443", downstreamTLS: true, downstreamClientCA: "\(pki)/ca.pem"\(allowed)}
        """,
      names: ["secure"], closedPorts: closedUpstream.map { ["httpbin.org": $0] } ?? [:])
    return proxy!.ports["secure"]!
  }

  private func curl(_ port: Int, client: String?) throws -> CurlResult {
    let ca = proxy!.directory.appendingPathComponent("state/ca.pem").path
    let certificate = client.map { ["--cert", "\(pki)/\($0).pem", "--key", "\(pki)/\($0).key"] } ?? []
    return try Curl.run(
      ["--cacert", ca, "--resolve", "httpbin.org:\(port):127.0.0.1"] + certificate
        + ["https://httpbin.org:\(port)/hello"])
  }

  /// `openssl s_client` as a client of the listener: its whole output.
  private func sClient(_ port: Int, client: String?) throws -> String {
    let certificate = client.map { ["-cert", "\(pki)/\($0).pem", "-key", "\(pki)/\($0).key"] } ?? []
    let script =
      "printf 'GET /hello HTTP/1.1\\r\\nHost: httpbin.org\\r\\nConnection: close\\r\\n\\r\\n' | "
      + "timeout 10 openssl s_client -quiet -connect 127.0.0.1:\(port) -servername httpbin.org "
      + certificate.joined(separator: " ") + " 2>&1"
    return try Subprocess.run("/bin/sh", ["-c", script]).stdout
  }

  private func refusedLines() -> [String] {
    proxy!.completeLogLines.filter { $0.contains(" refused ") && $0.contains("code=client-not-allowed") }
  }

  func testAnAllowedCommonNameFromTheCAIsServedByCurlAndSClient() throws {
    let origin = try origin()
    let port = try startTunnel(names: "{cn: [pos-terminal-1]}", origin: origin)
    let result = try curl(port, client: "pos")
    XCTAssertEqual(result.status, 200, result.stderr)
    XCTAssertEqual(result.text, "hello from origin\n")
    let output = try sClient(port, client: "pos")
    XCTAssertTrue(output.contains("hello from origin"), output)
    XCTAssertTrue(refusedLines().isEmpty, proxy!.log)
  }

  func testAnotherCommonNameFromTheRightCAIsRefusedWithAnAlertAndOneLogLine() throws {
    let origin = try origin()
    let port = try startTunnel(names: "{cn: [pos-terminal-1]}", origin: origin)
    let result = try curl(port, client: "intruder")
    XCTAssertEqual(result.status, 0, "curl must not get an HTTP answer: \(result.text)")
    XCTAssertFalse(result.text.contains("hello from origin"))
    let output = try sClient(port, client: "intruder")
    XCTAssertTrue(output.lowercased().contains("alert"), "s_client saw no TLS alert: \(output)")
    XCTAssertFalse(output.contains("hello from origin"), output)
    XCTAssertTrue(PinListServer.eventually(timeout: 5) { self.refusedLines().count == 2 }, proxy!.log)
    let line = refusedLines()[0]
    XCTAssertTrue(line.contains("CN=intruder sha256/"), line)
    XCTAssertTrue(line.contains("allowedClientNames"), line)
    XCTAssertTrue(line.contains("listener=secure"), line)
    XCTAssertFalse(origin.waitForRequest("GET /hello", timeout: 1), "a refused client reached the origin")
  }

  func testNoCertificateIsRefused() throws {
    let origin = try origin()
    let port = try startTunnel(names: nil, origin: origin)
    let result = try curl(port, client: nil)
    XCTAssertEqual(result.status, 0, result.text)
    let output = try sClient(port, client: nil)
    XCTAssertTrue(output.lowercased().contains("alert"), output)
    XCTAssertTrue(PinListServer.eventually(timeout: 5) { self.refusedLines().count == 2 }, proxy!.log)
    XCTAssertTrue(refusedLines()[0].contains("sent no certificate"), refusedLines()[0])
  }

  func testACertificateFromAnotherCAIsRefusedWhateverItsName() throws {
    let origin = try origin()
    let port = try startTunnel(names: "{cn: [pos-terminal-1]}", origin: origin)
    let result = try curl(port, client: "foreign")
    XCTAssertEqual(result.status, 0, result.text)
    XCTAssertTrue(PinListServer.eventually(timeout: 5) { !self.refusedLines().isEmpty }, proxy!.log)
    let line = refusedLines()[0]
    XCTAssertTrue(line.contains("CN=pos-terminal-1"), line)
    XCTAssertTrue(line.contains("unable to get local issuer certificate"), line)
  }

  func testAURINameAllowsTheCertificateCarryingIt() throws {
    let origin = try origin()
    let port = try startTunnel(names: "{uri: [\"spiffe://shop.example/pos/1\"]}", origin: origin)
    XCTAssertEqual(try curl(port, client: "pos").status, 200)
    XCTAssertEqual(try curl(port, client: "intruder").status, 0)
  }

  /// The upstream is dialled only for a verified client: with it closed, an
  /// allowed client's tunnel fails upstream, a refused one never gets there.
  func testARefusedClientCausesNoUpstreamConnection() throws {
    let closed = try OpenSSLServer.closedPort()
    let port = try startTunnel(names: "{cn: [pos-terminal-1]}", closedUpstream: closed)
    _ = try curl(port, client: "intruder")
    XCTAssertTrue(PinListServer.eventually(timeout: 5) { !self.refusedLines().isEmpty }, proxy!.log)
    Thread.sleep(forTimeInterval: 0.5)
    XCTAssertFalse(proxy!.log.contains("upstream-unreachable"), proxy!.log)
    _ = try curl(port, client: "pos")
    XCTAssertTrue(
      PinListServer.eventually(timeout: 5) { self.proxy!.log.contains("code=upstream-unreachable") },
      proxy!.log)
  }

  func testCheckRejectsClientCertificateKeysWhereTheyDoNotApply() throws {
    let config = try TemporaryFile(
      """
      listeners:
        - {name: fwd, address: "127.0.0.1:3128", downstreamClientCA: "\(pki)/ca.pem"}
        - {name: t, address: "127.0.0.1:3129", mode: tunnel, upstream: "a.example:443", downstreamTLS: true, allowedClientNames: {cn: [x]}}
      """)
    defer { config.remove() }
    let result = try Subprocess.pinproxy(["check", "--config", config.path])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("listeners[0].downstreamClientCA: client certificates are checked by tunnel"),
      result.stderr)
    XCTAssertTrue(
      result.stderr.contains("listeners[1].allowedClientNames: needs downstreamClientCA"), result.stderr)
  }

  /// `allowedClients` on a tunnel listener: the same accept check as a
  /// forward listener's, before the client's TLS or any upstream dial.
  func testATunnelListenersAllowedClientsAreCheckedAtAccept() throws {
    let origin = try origin()
    _ = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}",
      listeners: """
          - {name: plain, address: "127.0.0.1:{port:plain}", mode: tunnel, upstream: "httpbin.org:443", downstreamTLS: true, allowedClients: ["127.0.0.2/32"]}
        """,
      names: ["plain"])
    let port = proxy!.ports["plain"]!
    let ca = proxy!.directory.appendingPathComponent("state/ca.pem").path
    func fetch(from source: String) throws -> CurlResult {
      try Curl.run([
        "--interface", source, "--cacert", ca, "--resolve", "httpbin.org:\(port):127.0.0.1",
        "https://httpbin.org:\(port)/hello",
      ])
    }
    let allowed = try fetch(from: "127.0.0.2")
    XCTAssertEqual(allowed.status, 200, allowed.stderr)
    XCTAssertEqual(allowed.text, "hello from origin\n")
    let refused = try fetch(from: "127.0.0.3")
    XCTAssertEqual(refused.status, 0, "closed at accept: \(refused.text)")
    XCTAssertTrue(
      PinListServer.eventually(timeout: 5) {
        self.proxy!.log.contains("client-refused") && self.proxy!.log.contains("listener=plain")
      }, proxy!.log)
    XCTAssertEqual(
      origin.requests.filter { $0 == "GET /hello" }.count, 1, "only 127.0.0.2 reached the origin")
  }
}
