import Foundation
import PinTestSupport
import XCTest

/// Where the proxy may be made to connect: one port policy for CONNECT and
/// absolute-form, no loopback or link-local targets through `defaults`, and
/// refusals that do not tell a client what was listening.
final class UpstreamReachTests: ProxyTestCase {
  /// A proxy whose defaults validate (so any host could be tried), with one
  /// explicit rule for httpbin.org.
  func startPermissive(_ origin: Origin, rules: String = "") throws -> Int {
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      defaults: {action: validate}
      domains:
        - {domain: httpbin.org, anchors: [test]}
      \(rules)
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    return proxy!.ports["forward"]!
  }

  /// An absolute-form request with any scheme (curl would CONNECT for https).
  func absolute(_ url: String, through port: Int) throws -> (status: Int, code: String?, text: String) {
    let host = url.split(separator: "/")[1]
    let response = try RawHTTP.exchange(
      port: port, "GET \(url) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
    let status = Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0
    let code = response.split(separator: "\r\n").first { $0.lowercased().hasPrefix("pinproxy-error:") }
      .map { String($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) }
    let body = response.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, code, body)
  }

  func testAbsoluteFormObeysTheSamePortPolicyAsConnect() throws {
    let port = try startPermissive(try origin())
    let refused = try absolute("https://httpbin.org:8443/hello", through: port)
    XCTAssertEqual(refused.status, 403, refused.text)
    XCTAssertEqual(refused.code, "denied-by-policy")
    XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200)
  }

  /// Every spelling of a loopback address, and a name resolving to one, is
  /// refused under defaults: the origin never sees a request.
  func testDefaultsCannotReachLoopbackInAnySpelling() throws {
    let origin = try origin()
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [\(origin.port)]}
      defaults: {action: validate}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    let proxyPort = proxy!.ports["forward"]!
    for host in [
      "127.0.0.1", "0x7f000001", "2130706433", "127.1", "0177.0.0.1", "[::1]", "[::ffff:127.0.0.1]",
      "localhost",
    ] {
      let result = try absolute("https://\(host):\(origin.port)/hello", through: proxyPort)
      XCTAssertEqual(result.status, 403, "\(host): \(result.text)")
      XCTAssertEqual(result.code, "denied-by-policy", host)
    }
    XCTAssertTrue(origin.requests.isEmpty, "\(origin.requests)")
    XCTAssertTrue(proxy!.child.wait(for: "is a loopback address"), proxy!.log)
  }

  /// A domain rule that names the address is the operator's explicit choice.
  func testARuleNamingLoopbackAllowsIt() throws {
    let origin = try origin()
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [\(origin.port)]}
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      defaults: {action: deny}
      domains:
        - {domain: 127.0.0.1, anchors: [test], validatesDomainName: false}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    let result = try absolute("https://127.0.0.1:\(origin.port)/hello", through: proxy!.ports["forward"]!)
    XCTAssertEqual(result.status, 200, result.text)
  }

  /// Closed port, plain-text port, TLS port: the 502 body names the target
  /// and the code only; the OS and OpenSSL detail is in the log.
  func testRefusalBodiesDoNotDescribeWhatWasListening() throws {
    let origin = try origin()
    let closed = try OpenSSLServer.closedPort()
    let plain = try OpenSSLServer.freePort()
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(listener) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(plain).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var one: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    _ = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    listen(listener, 8)
    let port = try startProxy(
      map: ["httpbin.org": origin],
      domains: """
          - {domain: closed.httpbin.org, anchors: [test]}
          - {domain: plain.httpbin.org, anchors: [test]}
        """, closedPorts: ["closed.httpbin.org": closed, "plain.httpbin.org": plain])
    // The plain-text port answers the ClientHello with an HTTP error.
    let answering = Thread {
      let fd = accept(listener, nil, nil)
      guard fd >= 0 else { return }
      var buffer = [UInt8](repeating: 0, count: 1024)
      _ = recv(fd, &buffer, buffer.count, 0)
      let reply = Array("HTTP/1.1 400 Bad Request\r\nServer: secret-admin/1.0\r\n\r\n".utf8)
      _ = send(fd, reply, reply.count, 0)
      close(fd)
    }
    answering.start()
    let closedResult = try get("http://closed.httpbin.org/hello", through: port)
    assertRefused(closedResult, 502, "upstream-unreachable")
    XCTAssertEqual(
      closedResult.text,
      "pinproxy: upstream-unreachable: cannot connect to closed.httpbin.org:443\n"
        + "incident: \(closedResult.headers["pinproxy-incident"] ?? "?")\n")
    let plainResult = try get("http://plain.httpbin.org/hello", through: port)
    XCTAssertEqual(plainResult.status, 502, plainResult.text)
    XCTAssertFalse(
      plainResult.text.contains("wrong version") || plainResult.text.contains("secret"), plainResult.text)
    XCTAssertTrue(proxy!.child.wait(for: "Connection refused"), proxy!.log)
  }

  /// A tunnel listener's client that never speaks holds its slot only for the
  /// header timeout, not for tunnelIdle.
  func testASilentTunnelClientIsClosedAfterTheHeaderTimeout() throws {
    let origin = try origin()
    let config = httpbinConfig(
      origin, top: "timeouts: {clientHeader: 1s, tunnelIdle: 300s}",
      listeners:
        #"  - {name: tunnel, address: "127.0.0.1:{port:tunnel}", mode: tunnel, upstream: "httpbin.org:443"}"#)
    proxy = try ProxyProcess(config: config, listeners: ["tunnel"])
    let started = Date()
    let fd = try XCTUnwrap(Loopback.connect(port: proxy!.ports["tunnel"]!, receiveTimeout: 60))
    defer { close(fd) }
    XCTAssertEqual(Loopback.readAll(fd), "")
    let waited = Date().timeIntervalSince(started)
    XCTAssertGreaterThan(waited, 0.5)
    // Far below tunnelIdle (300 s); generous for a loaded machine.
    XCTAssertLessThan(waited, 30, "a silent tunnel client was held for \(waited) s")
    XCTAssertTrue(proxy!.child.wait(for: "client sent nothing within 1.0 s"), proxy!.log)
  }
}
