import Foundation
import PinTestSupport
import XCTest

/// CONNECT interception with real clients (curl, openssl s_client, Python's
/// urllib) against real TLS origins.
final class InterceptionTests: ProxyTestCase {
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }
  var port: Int { proxy!.ports["forward"]! }

  /// A proxy whose forward listener intercepts, with `hosts` mapped to `origin`.
  func startIntercepting(
    origin: Origin, hosts: [String], listenerOptions: String = "", domains: String? = nil
  ) throws {
    let connectTo = hosts.map { "\"\($0):443:127.0.0.1:\(origin.port)\"" }.joined(separator: ", ")
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward\(listenerOptions)}
      connectTo: [\(connectTo)]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      defaults: {action: deny}
      domains:
      \(domains ?? """
          - {domain: httpbin.org, anchors: [test], includesSubdomains: true}
          - domain: pinned.httpbin.org
            anchors: [test]
            pinningMode: publicKey
            pinnedPublicKeyHashes: ["\(Fixtures.certificate("adn.pem").spkiPin)"]
      """)
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
  }

  func curl(_ url: String, _ extra: [String] = []) throws -> CurlResult {
    try Curl.run(["-x", "http://127.0.0.1:\(port)", "--cacert", caPath, url] + extra)
  }

  func sClient(
    _ options: String,
    request: String = "GET /hello HTTP/1.1\\r\\nHost: httpbin.org\\r\\nConnection: close\\r\\n\\r\\n"
  )
    throws -> String
  {
    try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "printf '\(request)' | timeout 10 openssl s_client -proxy 127.0.0.1:\(port) \(options) -ign_eof 2>&1",
      ]
    ).stdout
  }

  func testInterceptedRequestIsServedUnderTheMintedLeaf() throws {
    try startIntercepting(origin: try origin(), hosts: ["httpbin.org"])
    let result = try curl("https://httpbin.org/hello", ["-v"])
    XCTAssertEqual(result.status, 200, result.stderr)
    XCTAssertEqual(result.text, "hello from origin\n")
    XCTAssertTrue(result.stderr.contains("issuer: O=pinproxy; CN=pinproxy local CA"), result.stderr)
    // curl offers h2 first, and an intercepting listener takes it (downstream.http2).
    XCTAssertTrue(result.stderr.contains("ALPN: server accepted h2"), result.stderr)
    XCTAssertTrue(proxy!.child.wait(for: "local-ca certificate=\(caPath) created=yes"), proxy!.log)
  }

  func testPinMismatchIsA502InsideTheClientsTLSSession() throws {
    try startIntercepting(origin: try origin(), hosts: ["pinned.httpbin.org"])
    let result = try curl("https://pinned.httpbin.org/hello")
    XCTAssertEqual(result.status, 502, result.stderr)
    XCTAssertEqual(result.pinproxyError, "pin-mismatch")
    XCTAssertTrue(result.text.hasPrefix("pinproxy: pin-mismatch: "), result.text)
  }

  func testExpiredUpstreamIsA502Expired() throws {
    try startIntercepting(origin: try origin("expired"), hosts: ["expired.httpbin.org"])
    let result = try curl("https://expired.httpbin.org/hello")
    XCTAssertEqual(result.status, 502, result.stderr)
    XCTAssertEqual(result.pinproxyError, "expired")
  }

  /// The CONNECT to a denied host is accepted so that the 403 can answer the
  /// request inside the client's TLS (ClientReachTests); no upstream is dialled.
  func testConnectToADeniedHostOpensNoUpstreamTunnel() throws {
    let origin = try origin()
    try startIntercepting(origin: origin, hosts: ["example.com"])
    let response = try RawHTTP.exchange(
      port: port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", timeout: 2)
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 200 Connection established\r\n"), response)
    XCTAssertEqual(try origin.statsHandshakes(), 0, "no tunnel may be opened to a denied host")
  }

  func testPassthroughHostKeepsTheOriginsOwnCertificateAndIsLoggedAsUnpinned() throws {
    try startIntercepting(
      origin: try origin(), hosts: ["pass.httpbin.org"], listenerOptions: ", passthrough: [\"*.httpbin.org\"]"
    )
    let result = try Curl.run([
      "-v", "-x", "http://127.0.0.1:\(port)", "--cacert", Fixtures.path("root-a.pem"),
      "https://pass.httpbin.org/hello",
    ])
    XCTAssertEqual(result.status, 200, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("issuer: O=pinproxy tests; CN=Pinproxy Test Intermediate A"), result.stderr)
    XCTAssertTrue(proxy!.child.wait(for: "pinning=\"none (spliced, not intercepted)\""), proxy!.log)
  }

  func testSNIThatDisagreesWithTheConnectHostIsRefused() throws {
    try startIntercepting(origin: try origin(), hosts: ["httpbin.org"])
    let output = try sClient("-connect httpbin.org:443 -servername other.example")
    XCTAssertFalse(output.contains("hello from origin"), output)
    XCTAssertTrue(
      proxy!.child.wait(for: "client asked for other.example (SNI) inside a CONNECT to httpbin.org"),
      proxy!.log)
  }

  func testLegacyTLS10ClientIsRefusedByDefault() throws {
    try startIntercepting(origin: try origin(), hosts: ["httpbin.org"])
    let output = try sClient(
      "-connect httpbin.org:443 -servername httpbin.org -tls1 -cipher DEFAULT@SECLEVEL=0")
    XCTAssertFalse(output.contains("hello from origin"), output)
  }

  func testLegacyTLS10ClientIsServedWhenTheListenerAllowsItWhileUpstreamStaysModern() throws {
    try startIntercepting(
      origin: try origin(), hosts: ["httpbin.org"],
      listenerOptions: ", downstream: {minimumTLSVersion: \"1.0\", ciphers: \"DEFAULT@SECLEVEL=0\"}")
    let output = try sClient(
      "-connect httpbin.org:443 -servername httpbin.org -tls1 -cipher DEFAULT@SECLEVEL=0")
    XCTAssertTrue(output.contains("hello from origin"), output)
    XCTAssertTrue(output.contains("Protocol  : TLSv1\n") || output.contains("TLSv1,"), output)
    // The origin accepts TLS 1.2+ only, so the upstream leg was modern.
  }

  func testPythonUrllibAsASecondClient() throws {
    try startIntercepting(origin: try origin(), hosts: ["httpbin.org", "pinned.httpbin.org"])
    let script = """
      import ssl, urllib.request, urllib.error
      context = ssl.create_default_context(cafile="\(caPath)")
      opener = urllib.request.build_opener(
          urllib.request.ProxyHandler({"https": "http://127.0.0.1:\(port)"}), urllib.request.HTTPSHandler(context=context))
      print(opener.open("https://httpbin.org/hello", timeout=10).read().decode(), end="")
      try:
          opener.open("https://pinned.httpbin.org/hello", timeout=10)
      except urllib.error.HTTPError as error:
          print(error.code, error.headers["Pinproxy-Error"])
      """
    let result = try Subprocess.run("/usr/bin/env", ["python3", "-c", script])
    XCTAssertEqual(result.stdout, "hello from origin\n502 pin-mismatch\n", result.stderr)
  }

  func testManyHostsInParallelAreEachMintedExactlyOnce() throws {
    let hosts = (0..<12).map { "h\($0).httpbin.org" }
    try startIntercepting(origin: try origin(), hosts: hosts)
    let urls = hosts.flatMap { Array(repeating: "https://\($0)/hello", count: 3) }
    let result = try Subprocess.run(
      "/usr/bin/curl",
      [
        "-s", "--parallel", "--parallel-max", "36", "-x", "http://127.0.0.1:\(port)", "--cacert", caPath,
        "-w", "%{http_code}\n",
      ]
        + urls.flatMap { ["-o", "/dev/null", $0] })
    XCTAssertEqual(result.stdout.split(separator: "\n").filter { $0 == "200" }.count, 36, result.stdout)
    for host in hosts {
      XCTAssertTrue(proxy!.child.wait(for: "minted host=\(host) "), proxy!.log)
      XCTAssertEqual(
        proxy!.log.components(separatedBy: "minted host=\(host) ").count - 1, 1, "\(host): \(proxy!.log)")
    }
  }

  func testOperatorSuppliedIntermediateSignsLeavesAndIsSentInTheChain() throws {
    let origin = try origin()
    let config = """
      localCA: {certificate: "\(Fixtures.path("int-a.pem"))", key: "\(Fixtures.path("int-a.key"))"}
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      domains:
        - {domain: httpbin.org, anchors: [test]}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    // The client trusts only the operator's root: the leaf must chain through the intermediate.
    let result = try Curl.run([
      "-v", "-x", "http://127.0.0.1:\(port)", "--cacert", Fixtures.path("root-a.pem"),
      "https://httpbin.org/hello",
    ])
    XCTAssertEqual(result.status, 200, result.stderr)
    XCTAssertTrue(
      result.stderr.contains("issuer: O=pinproxy tests; CN=Pinproxy Test Intermediate A"), result.stderr)
    XCTAssertTrue(result.stderr.contains("subject: O=pinproxy; CN=httpbin.org"), result.stderr)
  }
}
