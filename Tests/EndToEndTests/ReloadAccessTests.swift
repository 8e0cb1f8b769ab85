import Foundation
import PinTestSupport
import XCTest

/// A reload governs who may use the proxy on connections already open, and
/// a reload that changes a listener's name, address or mode (which takes a
/// restart) closes that listener rather than running it under another's rules.
final class ReloadAccessTests: ProxyTestCase {
  func config(_ origin: Origin, listener: String) -> String {
    httpbinConfig(origin, listeners: "  - \(listener)")
  }

  /// A first request, the reload, a second request on the same connection.
  func secondRequest(after reloaded: String, first listener: String, h2: Bool) throws -> (String, String) {
    let origin = try origin()
    proxy = try ProxyProcess(config: config(origin, listener: listener), listeners: ["forward"])
    return try requestsAcross(reload: config(origin, listener: reloaded), h2: h2)
  }

  static let open = #"{name: forward, address: "127.0.0.1:{port:forward}", mode: forward}"#
  static let elsewhere =
    #"{name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedClients: ["127.0.0.2/32"]}"#

  func testAKeepAliveConnectionWhoseAddressAReloadRemovedIsRefused() throws {
    let (first, second) = try secondRequest(after: Self.elsewhere, first: Self.open, h2: false)
    XCTAssertEqual(first, "1 200 -")
    XCTAssertEqual(second, "2 403 client-not-allowed", proxy!.log)
  }

  func testAnHTTP2StreamWhoseAddressAReloadRemovedIsRefused() throws {
    let (first, second) = try secondRequest(after: Self.elsewhere, first: Self.open, h2: true)
    XCTAssertEqual(first, "1 200 -")
    XCTAssertEqual(second, "2 403 client-not-allowed", proxy!.log)
  }

  /// The listener is renamed by a reload: its socket stays bound (that takes
  /// a restart), and nobody is served on it rather than the old rules or none.
  func testAListenerRenamedByAReloadServesNobodyUntilARestart() throws {
    let renamed = #"{name: renamed, address: "127.0.0.1:{port:forward}", mode: forward}"#
    let (first, second) = try secondRequest(after: renamed, first: Self.open, h2: false)
    XCTAssertEqual(first, "1 200 -")
    XCTAssertEqual(second, "2 403 client-not-allowed", proxy!.log)
    XCTAssertTrue(proxy!.child.wait(for: "reload-listeners-unchanged"), proxy!.log)
    let fresh = try get("http://httpbin.org/hello", through: proxy!.ports["forward"]!)
    XCTAssertEqual(fresh.status, 0, "a new connection is closed at accept: \(fresh.text)")
  }

  /// A reload that removes `admin` leaves its socket bound and answering 403.
  func testAnAdminEndpointRemovedByAReloadServesNothing() throws {
    let origin = try origin()
    let admin = "admin: {address: \"127.0.0.1:{port:admin}\"}"
    proxy = try ProxyProcess(config: httpbinConfig(origin, top: admin), listeners: ["forward", "admin"])
    let port = proxy!.ports["admin"]!
    XCTAssertEqual(try Curl.run(["http://127.0.0.1:\(port)/policies"]).status, 200)
    try proxy!.rewrite(config: httpbinConfig(origin))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    XCTAssertEqual(try Curl.run(["http://127.0.0.1:\(port)/policies"]).status, 403)
    XCTAssertEqual(try Curl.run(["http://127.0.0.1:\(port)/metrics"]).status, 403)
  }

  /// Every absolute-form request on a keep-alive connection is judged by its
  /// own credential: the same bytes again are recognised, another user's
  /// are verified afresh, and a wrong one is refused even after good ones.
  func testEachPipelinedRequestIsJudgedByItsOwnCredential() throws {
    let origin = try origin()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("auth-\(UUID().uuidString)")
      .path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let file = directory + "/users.htpasswd"
    for (index, (user, password)) in [("alice", "alice pw"), ("bob", "bob pw")].enumerated() {
      let made = try Subprocess.run(
        "/usr/bin/htpasswd", (index == 0 ? ["-c"] : []) + ["-B", "-b", file, user, password])
      XCTAssertEqual(made.status, 0, "htpasswd (apache2-utils) is required: \(made.stderr)")
    }
    let listener =
      #"{name: forward, address: "127.0.0.1:{port:forward}", mode: forward, proxyAuth: {htpasswd: ""#
      + file + #"", logUser: true}}"#
    proxy = try ProxyProcess(config: config(origin, listener: listener), listeners: ["forward"])
    func request(_ user: String, _ password: String) -> String {
      let credential = Data("\(user):\(password)".utf8).base64EncodedString()
      return "GET http://httpbin.org/hello HTTP/1.1\r\nHost: httpbin.org\r\n"
        + "Proxy-Authorization: Basic \(credential)\r\n\r\n"
    }
    guard let fd = Loopback.connect(port: proxy!.ports["forward"]!) else {
      throw HarnessError("connect failed")
    }
    defer { close(fd) }
    Loopback.send(
      fd,
      request("alice", "alice pw") + request("alice", "alice pw") + request("bob", "bob pw")
        + request("alice", "bob pw"))
    let answers = Loopback.readAll(fd).components(separatedBy: "\n").filter { $0.hasPrefix("HTTP/1.1 ") }
      .map { String($0.prefix(12)) }
    XCTAssertEqual(answers, ["HTTP/1.1 200", "HTTP/1.1 200", "HTTP/1.1 200", "HTTP/1.1 407"], proxy!.log)
    XCTAssertTrue(
      PinListServer.eventually(timeout: 5) { self.proxy!.log.contains("code=proxy-auth-required") })
    let served = proxy!.completeLogLines.filter { $0.contains(" request ") }
    XCTAssertEqual(served.filter { $0.contains("user=alice") }.count, 2, proxy!.log)
    XCTAssertEqual(served.filter { $0.contains("user=bob") }.count, 1, proxy!.log)
  }

  /// Spliced connections decide nothing per request: a reload that takes
  /// their client's address away closes them. `listeners` holds one
  /// listener named `forward`; `open` starts its splice on a raw socket.
  func spliceIsClosedByAReload(listener: String, reloaded: String, open: (Int32) throws -> Void) throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: config(origin, listener: listener) + "\ntimeouts: {clientHeader: 60s}", listeners: ["forward"])
    guard let fd = Loopback.connect(port: proxy!.ports["forward"]!, receiveTimeout: 15) else {
      throw HarnessError("connect failed")
    }
    defer { close(fd) }
    try open(fd)
    usleep(300_000)
    try proxy!.rewrite(config: config(origin, listener: reloaded) + "\ntimeouts: {clientHeader: 60s}")
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let started = Date()
    var byte: UInt8 = 0
    XCTAssertEqual(recv(fd, &byte, 1, 0), 0, "the proxy closes the splice")
    XCTAssertLessThan(Date().timeIntervalSince(started), 5, "closed by the reload, not a timeout")
    XCTAssertTrue(
      PinListServer.eventually(timeout: 5) {
        self.proxy!.log.contains("tunnel-closed")
          && self.proxy!.log.contains("out of the listener's allowedClients")
      }, proxy!.log)
  }

  func testATunnelListenersSpliceIsClosedWhenAReloadRemovesItsAddress() throws {
    let tunnel =
      #"{name: forward, address: "127.0.0.1:{port:forward}", mode: tunnel, upstream: "httpbin.org:443"}"#
    let moved = String(tunnel.dropLast()) + #", allowedClients: ["127.0.0.2/32"]}"#
    try spliceIsClosedByAReload(listener: tunnel, reloaded: moved) { _ in }
  }

  func testAPassthroughSpliceIsClosedWhenAReloadRemovesItsAddress() throws {
    let passthrough =
      #"{name: forward, address: "127.0.0.1:{port:forward}", mode: forward, intercept: false}"#
    let moved = String(passthrough.dropLast()) + #", allowedClients: ["127.0.0.2/32"]}"#
    try spliceIsClosedByAReload(listener: passthrough, reloaded: moved) { fd in
      Loopback.send(fd, "CONNECT httpbin.org:443 HTTP/1.1\r\nHost: httpbin.org:443\r\n\r\n")
      var buffer = [UInt8](repeating: 0, count: 512)
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      let answer = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)
      XCTAssertTrue(answer.hasPrefix("HTTP/1.1 200 "), answer)
    }
  }
}
