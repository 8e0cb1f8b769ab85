import Foundation
import PinTestSupport
import XCTest

/// HTTP behaviour through the proxy: connection reuse, streaming both ways,
/// back-pressure, limits, and request-smuggling shapes.
final class ForwardHTTPTests: ProxyTestCase {
  var origin: Origin!
  var port = 0

  override func setUpWithError() throws {
    origin = try self.origin()
    port = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "limits: {maxHeaderBytes: 4096, maxURILength: 1024}")
  }

  func testKeepAliveReusesOneUpstreamHandshakeForManyRequests() throws {
    let urls = Array(repeating: "http://httpbin.org/hello", count: 8)
    let result = try Subprocess.run(
      "/usr/bin/curl", ["-s", "-x", "http://127.0.0.1:\(port)"] + urls + ["http://httpbin.org/stats"])
    XCTAssertEqual(result.stdout.components(separatedBy: "hello from origin").count - 1, 8, result.stdout)
    XCTAssertTrue(result.stdout.hasSuffix("handshakes=1 requests=9\n"), result.stdout)
    XCTAssertTrue(proxy!.child.wait(for: "upstream_connection=pooled"), proxy!.log)
  }

  func testChunkedUploadReachesTheOriginIntact() throws {
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("upload-\(UUID().uuidString)")
    let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    try Data(bytes).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let result = try get(
      "http://httpbin.org/echo", through: port,
      ["-X", "POST", "-H", "Transfer-Encoding: chunked", "--data-binary", "@\(file.path)"])
    XCTAssertEqual(result.status, 200, result.text)
    let digest = try Subprocess.run("/usr/bin/sha256sum", [file.path]).stdout.prefix(64)
    XCTAssertEqual(result.text, "3000000 \(digest)\n")
  }

  func testLargeStreamedDownloadIsByteIdenticalToADirectFetch() throws {
    let url = "https://httpbin.org:\(origin.port)/bytes/20000000"
    let direct = try Curl.run([
      "--cacert", Fixtures.path("root-a.pem"), "--resolve", "httpbin.org:\(origin.port):127.0.0.1", url,
    ])
    let proxied = try get("http://httpbin.org/bytes/20000000", through: port)
    XCTAssertEqual(proxied.status, 200)
    XCTAssertEqual(proxied.body.count, 20_000_000)
    XCTAssertTrue(proxied.body == direct.body, "the proxied body differs from the direct one")
  }

  func testASlowClientDoesNotMakeTheProxyBufferTheResponse() throws {
    let before = proxy!.child.residentKilobytes
    // A client that sends a request for 200 MB and then does not read.
    let fd = try XCTUnwrap(Loopback.connect(port: port))
    defer { close(fd) }
    Loopback.send(fd, "GET http://httpbin.org/bytes/200000000 HTTP/1.1\r\nHost: httpbin.org\r\n\r\n")
    sleep(3)
    let during = proxy!.child.residentKilobytes
    XCTAssertLessThan(
      during - before, 40_000, "RSS grew from \(before) kB to \(during) kB while the client read nothing")
  }

  func testSmugglingShapesGet400AndNeverReachTheOrigin() throws {
    let shapes = [
      "POST http://httpbin.org/echo HTTP/1.1\r\nHost: httpbin.org\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST http://httpbin.org/echo HTTP/1.1\r\nHost: httpbin.org\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
      "POST http://httpbin.org/echo HTTP/1.1\r\nHost: httpbin.org\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
      "POST http://httpbin.org/echo HTTP/1.1\r\nHost: httpbin.org\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
      "GET http://httpbin.org/hello HTTP/1.1\r\nHost: httpbin.org\r\nX-Folded: a\r\n b\r\n\r\n",
      "GET http://httpbin.org/hello HTTP/1.1\nHost: httpbin.org\n\n",
      "GET http://httpbin.org/hello HTTP/1.1\r\nHost: httpbin.org\r\nX-A: a\rb\r\n\r\n",
      "GET http://httpbin.org/hello HTTP/1.1\r\nHost: httpbin.org\r\nX-A: a\u{0}b\r\n\r\n",
      "GET http://httpbin.org/hello HTTP/1.1\r\nHost : httpbin.org\r\n\r\n",
    ]
    for shape in shapes {
      let response = try RawHTTP.exchange(port: port, shape)
      XCTAssertTrue(response.hasPrefix("HTTP/1.1 400 "), "\(shape.debugDescription): \(response)")
      XCTAssertTrue(response.contains("Pinproxy-Error: bad-request\r\n"), response)
    }
    // A valid request afterwards proves the origin was reachable all along.
    let control = try RawHTTP.exchange(
      port: port, "GET http://httpbin.org/hello HTTP/1.1\r\nHost: httpbin.org\r\nConnection: close\r\n\r\n")
    XCTAssertTrue(control.hasPrefix("HTTP/1.1 200 "), control)
    XCTAssertEqual(origin.requests, ["GET /hello"], "only the control request may reach the origin")
  }

  func testHeadAndURILimitsAnswer431And414() throws {
    let bigHeader = try get(
      "http://httpbin.org/hello", through: port, ["-H", "X-Big: \(String(repeating: "a", count: 5000))"])
    XCTAssertEqual(bigHeader.status, 431)
    XCTAssertEqual(bigHeader.pinproxyError, "bad-request")
    let longURI = try get("http://httpbin.org/\(String(repeating: "a", count: 1100))", through: port)
    XCTAssertEqual(longURI.status, 414)
    XCTAssertEqual(longURI.pinproxyError, "bad-request")
    XCTAssertEqual(origin.requests, [])
  }

  func testOriginFormIsRefusedAndConnectOnlyReachesAllowedPorts() throws {
    let originForm = try RawHTTP.exchange(port: port, "GET /hello HTTP/1.1\r\nHost: httpbin.org\r\n\r\n")
    XCTAssertTrue(originForm.hasPrefix("HTTP/1.1 400 ") && originForm.contains("absolute-form"), originForm)
    let connect = try RawHTTP.exchange(
      port: port, "CONNECT httpbin.org:22 HTTP/1.1\r\nHost: httpbin.org:22\r\n\r\n")
    XCTAssertTrue(connect.hasPrefix("HTTP/1.1 403 "), connect)
    XCTAssertTrue(connect.contains("Pinproxy-Error: denied-by-policy\r\n"), connect)
    XCTAssertTrue(connect.contains("allowedConnectPorts"), connect)
  }

  func testHopByHopHeadersAreNotForwardedAndHostComesFromTheTarget() throws {
    let response = try RawHTTP.exchange(
      port: port,
      "GET http://httpbin.org/headers HTTP/1.1\r\nHost: wrong.example\r\nConnection: close, X-Secret\r\nX-Secret: 1\r\n"
        + "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nKeep-Alive: 5\r\nTE: trailers\r\n"
        + "X-Kept: yes\r\n\r\n")
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 200 "), response)
    let received = response.components(separatedBy: "\r\n\r\n").last ?? ""
    XCTAssertTrue(received.contains("Host: httpbin.org\n"), received)
    XCTAssertTrue(received.contains("X-Kept: yes\n"), received)
    XCTAssertTrue(received.contains("Via: 1.1 pinproxy\n"), received)
    for removed in [
      "X-Secret", "Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "TE:", "wrong.example",
    ] {
      XCTAssertFalse(received.contains(removed), "\(removed) reached the origin: \(received)")
    }
  }
}

/// Connection lifecycle limits and TLS session reuse, each with its own proxy settings.
final class ForwardLifecycleTests: ProxyTestCase {
  func testSecondUpstreamConnectionResumesTheTLSSession() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "limits: {maxIdlePerUpstream: 0}")
    for _ in 0..<2 { XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200) }
    XCTAssertTrue(proxy!.child.wait(for: "upstream_tls=resumed"), proxy!.log)
    XCTAssertEqual(proxy!.log.components(separatedBy: "upstream_tls=full").count - 1, 1, proxy!.log)
  }

  func testIncompleteRequestHeadGets408() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "timeouts: {clientHeader: 1s}")
    let started = Date()
    let response = try RawHTTP.exchange(port: port, "GET http://httpbin.org/hello HTTP/1.1\r\nHost: http")
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 408 "), response)
    XCTAssertLessThan(Date().timeIntervalSince(started), 5)
  }

  func testConnectionsBeyondTheLimitGet503WhenEveryOneIsMidExchange() throws {
    let origin = try origin()
    let port = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "limits: {maxConnections: 2}")
    // Two slow exchanges in flight hold both places; neither may be cut.
    let slow = try (0..<2).map { _ in
      try BackgroundCommand(
        "/usr/bin/curl", ["-s", "-x", "http://127.0.0.1:\(port)", "http://httpbin.org/slow/6"])
    }
    XCTAssertTrue(origin.waitForRequest("GET /slow/6", count: 2), "both slow requests must be in flight")
    let refused = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(refused.status, 503, refused.text)
    XCTAssertEqual(refused.pinproxyError, "upstream-unreachable")
    for command in slow { XCTAssertEqual(command.finish().1, "slow\n") }
    XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200)
  }

  /// A client that opens slots and sends nothing (or half a head) cannot keep
  /// others out: at the limit the longest-waiting such connection is closed.
  func testIdleAndSlowConnectionsAreClosedFirstAtTheLimit() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "limits: {maxConnections: 20}")
    var held: [Int32] = []
    defer { held.forEach { close($0) } }
    for index in 0..<40 {
      guard let fd = Loopback.connect(port: port) else { continue }
      if index % 2 == 0 { Loopback.send(fd, "GET http://httpbin.org/hello HTTP/1.1\r\nHo") }
      held.append(fd)
    }
    usleep(300_000)
    for _ in 0..<10 {
      let result = try get("http://httpbin.org/hello", through: port)
      XCTAssertEqual(result.status, 200, result.text)
    }
  }

  func testOneClientAddressCannotTakeMoreThanItsShare() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "limits: {maxConnections: 100, maxConnectionsPerClient: 3}")
    // Three exchanges in flight: none of them may be evicted to make room.
    let busy = try (0..<3).map { _ in
      try BackgroundCommand(
        "/usr/bin/curl",
        ["-s", "-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "http://httpbin.org/slow/2"])
    }
    XCTAssertTrue(origins[0].waitForRequest("GET /slow/2", count: 3))
    let refused = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(refused.status, 503, refused.text)
    XCTAssertTrue(refused.text.contains("per client address"), refused.text)
    busy.forEach { _ = $0.finish() }
    usleep(300_000)
    XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200)
  }
}

extension ForwardHTTPTests {
  /// Intercepted clients that stop part way into their TLS handshake with
  /// the local CA hold slots as half-sent heads do: at the limit they are
  /// the ones closed, and whole requests inside TLS are served.
  func testHalfFinishedHandshakesWithTheLocalCAAreEvictedAtTheLimit() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "limits: {maxConnections: 20}")
    var held: [Int32] = []
    defer { held.forEach { close($0) } }
    for _ in 0..<20 {
      guard let fd = Loopback.connect(port: port) else { continue }
      Loopback.send(fd, "CONNECT httpbin.org:443 HTTP/1.1\r\nHost: httpbin.org:443\r\n\r\n")
      var answer = [UInt8](repeating: 0, count: 128)
      _ = answer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      // A handshake record header and the start of a ClientHello, then nothing.
      Loopback.send(fd, "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}")
      held.append(fd)
    }
    XCTAssertEqual(held.count, 20)
    let ca = proxy!.directory.appendingPathComponent("state/ca.pem").path
    for probe in 1...10 {
      let result = try Curl.run(
        ["--max-time", "10", "--cacert", ca, "-x", "http://127.0.0.1:\(port)", "https://httpbin.org/hello"])
      XCTAssertEqual(result.status, 200, "probe \(probe): \(result.text) \(result.stderr)")
    }
  }
}
