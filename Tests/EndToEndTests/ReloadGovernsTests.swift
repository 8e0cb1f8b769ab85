import Foundation
import PinTestSupport
import XCTest

/// A reload governs every decision made after it: connections
/// opened before it get the new policy on their next request or stream.
/// And per-client accounting: one local client's slow connections cannot
/// lock out the next local client.
final class ReloadGovernsTests: ProxyTestCase {
  func config(_ origin: Origin, pin: String) -> String {
    httpbinConfig(origin).replacingOccurrences(
      of: "{domain: httpbin.org, anchors: [test]}",
      with:
        "{domain: httpbin.org, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: [\"\(pin)\"]}")
  }

  /// A first request, a reload to a pin the origin cannot match, a second
  /// request on the same connection.
  func secondRequestAfterTighteningReload(h2: Bool) throws -> (first: String, second: String) {
    let origin = try origin()
    let good = Fixtures.certificate("root-a.pem").spkiPin
    proxy = try ProxyProcess(config: config(origin, pin: good), listeners: ["forward"])
    return try requestsAcross(reload: config(origin, pin: Fixtures.certificate("adn.pem").spkiPin), h2: h2)
  }

  func testKeepAliveConnectionGetsTheNewPolicyAfterReload() throws {
    let (first, second) = try secondRequestAfterTighteningReload(h2: false)
    XCTAssertEqual(first, "1 200 -")
    XCTAssertEqual(second, "2 502 pin-mismatch", proxy!.log)
  }

  func testHTTP2ConnectionGetsTheNewPolicyOnItsNextStream() throws {
    let (first, second) = try secondRequestAfterTighteningReload(h2: true)
    XCTAssertEqual(first, "1 200 -")
    XCTAssertEqual(second, "2 502 pin-mismatch", proxy!.log)
  }

  /// One local process holds every per-client slot with connections that
  /// trickle a head: the next local client evicts one of them and is served.
  func testPerClientLimitEvictsTheClientsOwnSlowConnections() throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: httpbinConfig(origin, top: "limits: {maxConnectionsPerClient: 20}"), listeners: ["forward"])
    let port = proxy!.ports["forward"]!
    var holders: [Int32] = []
    defer { holders.forEach { close($0) } }
    for _ in 0..<20 {
      guard let fd = Loopback.connect(port: port) else { throw HarnessError("connect failed") }
      _ = "GET http://httpbin.org/hello HTTP/1.1\r\nHo".withCString { send(fd, $0, strlen($0), 0) }
      holders.append(fd)
    }
    usleep(300_000)
    let start = Date()
    let result = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertLessThan(Date().timeIntervalSince(start), 3)
    XCTAssertTrue(proxy!.child.wait(for: "evicted"), proxy!.log)
  }

  /// At the per-client limit with nothing to evict, the refusal is a 503
  /// the client reads (closed lingeringly), not a reset.
  func testPerClientRefusalIsA503TheClientReads() throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: httpbinConfig(origin, top: "limits: {maxConnectionsPerClient: 2}"), listeners: ["forward"])
    let port = proxy!.ports["forward"]!
    // Two exchanges in flight: neither may be evicted.
    let busy = try (0..<2).map { _ in
      try BackgroundCommand(
        "/usr/bin/curl",
        ["-s", "-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "http://httpbin.org/slow/3"])
    }
    XCTAssertTrue(origin.waitForRequest("GET /slow/3", count: 2))
    // An upload whose head and first 300 KB are already sent when the 503
    // comes: closed with them unread, the socket would be reset and the
    // kernel would discard the answer before the client reads it.
    guard let fd = Loopback.connect(port: port) else { throw HarnessError("connect failed") }
    defer { close(fd) }
    let head = "POST http://httpbin.org/echo HTTP/1.1\r\nHost: httpbin.org\r\nContent-Length: 2000000\r\n\r\n"
    let upload = Array(head.utf8) + [UInt8](repeating: 0x78, count: 300_000)
    var sent = 0
    while sent < upload.count {
      let n = upload[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
      guard n > 0 else { break }
      sent += n
    }
    usleep(500_000)
    var answer: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let n = recv(fd, &buffer, buffer.count, 0)
      guard n > 0 else { break }
      answer += buffer[0..<n]
    }
    let text = String(decoding: answer, as: UTF8.self)
    XCTAssertTrue(text.hasPrefix("HTTP/1.1 503 "), "errno \(errno): \(text)")
    XCTAssertTrue(text.contains("connection limit per client address 2"), text)
    busy.forEach { _ = $0.finish() }
  }
}
