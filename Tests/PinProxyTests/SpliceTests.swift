import Foundation
import PinEventLoop
import PinTrust
import XCTest

@testable import PinProxy

/// The one raw relay (passthrough CONNECT, tunnel listeners) between two
/// socket pairs: the test holds the far end of each.
final class SpliceTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  lazy var loop = EventLoop(name: "splice-test")
  let ended = Locked<Int>(0)

  /// A splice between a "client" and an "upstream" pair; returns the test's ends.
  func makeSplice(idleLimit: Double = 60) throws -> (client: TestClient, upstream: TestClient) {
    let (clientNear, clientFar) = try SocketPair.makeNonBlocking()
    let (upstreamNear, upstreamFar) = try SocketPair.makeNonBlocking()
    let loop = self.loop
    let ended = self.ended
    loop.queue.sync {
      _ = Splice(
        client: Connection(fd: clientNear, peer: "client", loop: loop),
        upstream: .plain(Connection(fd: upstreamNear, peer: "upstream", loop: loop)), idleLimit: idleLimit
      ) { _ in ended.withLock { $0 += 1 } }
    }
    return (TestClient(fd: clientFar), TestClient(fd: upstreamFar))
  }

  func testBytesFlowBothWaysAndAHalfCloseIsPassedOnEachWay() throws {
    let (client, upstream) = try makeSplice()
    client.send("ping")
    XCTAssertTrue(upstream.read { $0.text == "ping" })
    upstream.send("pong")
    XCTAssertTrue(client.read { $0.text == "pong" })
    client.shutdownWrite()
    XCTAssertTrue(upstream.read { $0.sawEOF }, "the client's FIN reaches the upstream")
    upstream.send("late")
    XCTAssertTrue(client.read { $0.text == "ponglate" }, "the other way stays open: \(client.text)")
    upstream.shutdownWrite()
    XCTAssertTrue(client.read { $0.sawEOF })
    XCTAssertTrue(waitUntil { self.ended.withLock { $0 } == 1 }, "the splice ends once both sides finished")
  }

  func testAClientThatDoesNotReadStopsTheUpstreamBeingRead() throws {
    let (client, upstream) = try makeSplice()
    let chunk = [UInt8](repeating: 0x61, count: 64 * 1024)
    var offered = 0
    let deadline = Date().addingTimeInterval(1.5)
    while Date() < deadline && offered < 64 << 20 {
      let taken = upstream.offer(chunk)
      offered += taken
      if taken == 0 { usleep(10_000) }
    }
    // Socket buffers and the splice's own high watermark hold a few hundred
    // kilobytes; without back-pressure the splice would take everything.
    XCTAssertLessThan(offered, 8 << 20, "the splice kept reading a client that reads nothing")
    XCTAssertTrue(client.read(timeout: 20) { $0.received.count >= offered })
    XCTAssertEqual(client.received.count, offered)
  }

  func testSilenceBothWaysForTheIdleLimitClosesBothSides() throws {
    let (client, upstream) = try makeSplice(idleLimit: 0.3)
    client.send("a")
    XCTAssertTrue(upstream.read { $0.text == "a" })
    XCTAssertTrue(client.read(timeout: 5) { $0.sawEOF })
    XCTAssertTrue(upstream.read(timeout: 5) { $0.sawEOF })
    XCTAssertTrue(waitUntil { self.ended.withLock { $0 } == 1 })
  }
}
