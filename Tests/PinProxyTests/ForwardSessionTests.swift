import Foundation
import PinEventLoop
import PinTrust
import XCTest

@testable import PinProxy

/// The real forward session, pool, dialer and splice-free data path, in
/// process: the client is one end of a socket pair, the origin a
/// `ScriptedOrigin` on 127.0.0.1. One scenario per test.
final class ForwardSessionTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  func request(_ origin: ScriptedOrigin, _ path: String = "/") -> String {
    "GET http://127.0.0.1:\(origin.port)\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
  }

  func testInterimResponsesReachTheClientBeforeTheFinalOne() throws {
    let origin = try ScriptedOrigin { connection, _, _ in
      connection.write(
        Array(
          "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
            .utf8))
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    let client = try proxy.connectClient()
    client.send(request(origin))
    XCTAssertTrue(client.read { $0.text.hasSuffix("\r\n\r\nok") }, client.text)
    let text = client.text
    let early = try XCTUnwrap(text.range(of: "HTTP/1.1 103 Early Hints\r\n"))
    let final = try XCTUnwrap(text.range(of: "HTTP/1.1 200 OK\r\n"))
    XCTAssertLessThan(early.lowerBound, final.lowerBound)
    XCTAssertTrue(
      text.contains("Link: </style.css>; rel=preload\r\n") == false, "1xx headers are not relayed: \(text)")
  }

  func testAPooledConnectionTheOriginClosesIsRetriedOnAFreshOne() throws {
    let origin = try ScriptedOrigin { connection, connectionIndex, requestIndex in
      switch (connectionIndex, requestIndex) {
      case (0, 0): connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\none".utf8))
      // The origin dropped the idle connection just as the second request arrived.
      case (0, _): connection.close()
      default: connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\ntwo".utf8))
      }
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    let client = try proxy.connectClient()
    client.send(request(origin, "/1"))
    XCTAssertTrue(client.read { $0.text.hasSuffix("one") }, client.text)
    client.send(request(origin, "/2"))
    XCTAssertTrue(client.read { $0.text.hasSuffix("two") }, client.text)
    XCTAssertFalse(client.contains("502"), client.text)
    XCTAssertEqual(origin.connectionCount, 2, "one fresh connection for the retry")
    XCTAssertEqual(origin.requestCount, 3, "the second request was sent twice, once on each connection")
  }

  func testASlowClientStopsTheUpstreamBeingRead() throws {
    let size = 32 << 20
    let origin = try ScriptedOrigin { connection, _, _ in
      connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: \(size)\r\n\r\n".utf8))
      connection.write([UInt8](repeating: UInt8(ascii: "x"), count: size))
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    let client = try proxy.connectClient()
    client.send(request(origin))
    // The client reads nothing for a while: the proxy must stop reading the
    // origin rather than buffer the body, so most of it stays with the origin.
    XCTAssertTrue(waitUntil { origin.connectionCount == 1 })
    Thread.sleep(forTimeInterval: 1.5)
    let stillAtOrigin = origin.onLoop(0) { $0.pendingOutputBytes }
    XCTAssertGreaterThan(
      stillAtOrigin, 8 << 20, "the proxy read \(size - stillAtOrigin) bytes nobody could take")
    // Then everything arrives, intact.
    XCTAssertTrue(
      client.read(timeout: 30) { $0.received.count >= size + 40 && $0.received.last == UInt8(ascii: "x") })
    // Compared with memcmp: 32 MiB walked byte by byte by generic code took
    // most of this test's 20 s under the sanitizers.
    let headLength = try XCTUnwrap(
      client.received.prefix(256).firstRange(of: Array("\r\n\r\n".utf8))?.upperBound, client.text)
    XCTAssertEqual(client.received.count - headLength, size)
    let expected = [UInt8](repeating: UInt8(ascii: "x"), count: size)
    let same = client.received.withUnsafeBytes { received in
      expected.withUnsafeBytes {
        memcmp(received.baseAddress! + headLength, $0.baseAddress!, min(size, received.count - headLength))
          == 0
      }
    }
    XCTAssertTrue(same, "the body arrived changed")
  }

  func testDrainClosesIdleClientsAndLetsAnExchangeInFlightFinish() throws {
    let held = Locked<Connection?>(nil)
    let origin = try ScriptedOrigin { connection, _, _ in held.withLock { $0 = connection } }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    let idle = try proxy.connectClient()
    let busy = try proxy.connectClient()
    busy.send(request(origin))
    XCTAssertTrue(waitUntil { held.withLock { $0 != nil } }, "the origin got the request")

    proxy.context.beginDraining()
    XCTAssertTrue(idle.read(timeout: 5) { $0.sawEOF }, "an idle client is closed at once")
    XCTAssertTrue(idle.received.isEmpty)

    let connection = try XCTUnwrap(held.withLock { $0 })
    connection.loop.execute { connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)) }
    XCTAssertTrue(busy.read { $0.sawEOF }, busy.text)
    XCTAssertTrue(busy.text.hasPrefix("HTTP/1.1 200 OK\r\n"), busy.text)
    XCTAssertTrue(busy.contains("Connection: close\r\n"), busy.text)
    XCTAssertTrue(busy.text.hasSuffix("\r\n\r\nok"), busy.text)
  }
}
