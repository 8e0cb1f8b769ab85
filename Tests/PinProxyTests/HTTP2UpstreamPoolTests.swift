import Foundation
import PinEventLoop
import XCTest

@testable import PinProxy

/// `HTTP2UpstreamPool` with real connections (`HTTP2UpstreamConnection`
/// over a socket pair to an `InProcessH2Origin`): what the requests that
/// joined a dial get when the new connection has less room than they
/// need, or the dial fails; how many may join; and idle connections
/// leaving the pool.
///
/// A request finding every connection full does not queue for a slot: it
/// gets `acquireAgain` and the acquirer opens another connection
/// (`UpstreamAcquirerTests`). A freed slot serves the next acquisition.
final class HTTP2UpstreamPoolTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  /// Records the outcomes the pool hands to joined requests.
  final class Waiters: @unchecked Sendable {
    private(set) var outcomes: [Int: HTTP2UpstreamPool.Outcome] = [:]
    func waiter(_ index: Int) -> (HTTP2UpstreamPool.Outcome) -> Void { { self.outcomes[index] = $0 } }
  }

  func testWaitersBeyondTheOriginsStreamLimitAcquireAgainAndAFreedSlotServesTheNext() throws {
    let origin = InProcessH2Origin(maxConcurrentStreams: 2, respond: InProcessH2Origin.answering([]))
    defer { origin.close() }
    let client = DirectH2Client()
    let connection = try client.connect(to: origin)
    XCTAssertTrue(client.waitForStreamLimit(2, on: connection), "the origin's SETTINGS arrived")
    let pool = client.pool
    let key = client.key
    let waiters = Waiters()
    let held = try XCTUnwrap(
      client.onLoop { () -> HTTP2UpstreamStream? in
        // One stream is in use; three requests joined the dial.
        let held = connection.reserveStream()
        XCTAssertTrue(pool.beginDial(key))
        for index in 0..<3 { XCTAssertTrue(pool.join(key, waiters.waiter(index))) }
        pool.dialed(key, .success(connection))
        return held
      })
    client.onLoop {
      guard case .stream(let stream)? = waiters.outcomes[0] else { return XCTFail("\(waiters.outcomes)") }
      XCTAssertTrue(stream.connection === connection, "the first waiter takes the one free slot")
      for index in 1...2 {
        guard case .acquireAgain? = waiters.outcomes[index] else {
          return XCTFail("waiter \(index): \(String(describing: waiters.outcomes[index]))")
        }
      }
      XCTAssertNil(pool.stream(for: key), "both slots are taken")
      held.close()
      let freed = pool.stream(for: key)
      XCTAssertNotNil(freed, "a freed slot is handed out again")
      XCTAssertTrue(freed?.connection === connection)
      XCTAssertEqual(freed?.reusedFromPool, true)
    }
  }

  func testWaitersOfAFailedDialGetItsFailure() {
    let client = DirectH2Client()
    let waiters = Waiters()
    client.onLoop {
      let pool = client.pool
      XCTAssertTrue(pool.beginDial(client.key))
      for index in 0..<3 { XCTAssertTrue(pool.join(client.key, waiters.waiter(index))) }
      pool.dialed(client.key, .failure(.cannotConnect("127.0.0.1:443", detail: "refused")))
      for index in 0..<3 {
        guard case .failed(let failure)? = waiters.outcomes[index] else {
          return XCTFail("waiter \(index): \(String(describing: waiters.outcomes[index]))")
        }
        XCTAssertEqual(failure.reason, ProxyFailure.cannotConnect("127.0.0.1:443", detail: "refused").reason)
      }
      XCTAssertTrue(pool.beginDial(client.key), "the failed dial no longer collects waiters")
    }
  }

  func testPastAFullWaitingListARequestDialsItself() {
    let client = DirectH2Client()
    client.onLoop {
      let pool = client.pool
      XCTAssertFalse(pool.join(client.key) { _ in }, "no dial under way: nothing to join")
      XCTAssertTrue(pool.beginDial(client.key))
      for _ in 0..<HTTP2UpstreamPool.maxWaiting { XCTAssertTrue(pool.join(client.key) { _ in }) }
      XCTAssertFalse(pool.join(client.key) { _ in }, "the waiting list is full")
      XCTAssertFalse(pool.beginDial(client.key), "its own dial is not the one others join")
    }
  }

  func testAnIdleConnectionPastItsIdleTimeoutIsClosedAndRemoved() throws {
    let origin = InProcessH2Origin(respond: InProcessH2Origin.answering(Array("ok".utf8)))
    defer { origin.close() }
    let client = DirectH2Client()
    // PINGed every 0.5 s (the floor); closed at the first tick past 0.4 s idle.
    let connection = try client.connect(to: origin, idleTimeout: 0.4)
    let delegate = RecordingUpstreamDelegate()
    let stream = try XCTUnwrap(client.send("/", on: connection, to: delegate))
    XCTAssertTrue(waitUntil { delegate.ended })
    client.onLoop {
      stream.release(
        to: UpstreamRelease(pool: UpstreamPool.unused(on: client.loop), idleTimeout: 60, maxIdle: 1))
      XCTAssertEqual(connection.state, .open, "idle, not yet past the timeout")
      XCTAssertEqual(client.pool.connections(for: client.key).count, 1)
    }
    XCTAssertTrue(waitUntil(timeout: 5) { client.onLoop { connection.state == .closed } })
    client.onLoop {
      XCTAssertTrue(client.pool.connections(for: client.key).isEmpty, "removed from the pool")
    }
    XCTAssertTrue(waitUntil { origin.onLoop { origin.connection(0).isClosed } }, "the socket is closed")
  }

  func testAnIdleConnectionWhoseOriginIgnoresPingIsClosedBeforeItsIdleTimeout() throws {
    let origin = InProcessH2Origin(respond: InProcessH2Origin.answering(Array("ok".utf8)))
    defer { origin.close() }
    let client = DirectH2Client()
    let idleTimeout = 4.0
    let connection = try client.connect(to: origin, idleTimeout: idleTimeout)
    let delegate = RecordingUpstreamDelegate()
    let stream = try XCTUnwrap(client.send("/", on: connection, to: delegate))
    XCTAssertTrue(waitUntil { delegate.ended })
    origin.onLoop { origin.connection(0).deaf = true }
    let idleSince = Date()
    client.onLoop {
      stream.release(
        to: UpstreamRelease(pool: UpstreamPool.unused(on: client.loop), idleTimeout: 60, maxIdle: 1))
    }
    // PINGed every second (idle timeout / 4): the second tick finds the first unanswered.
    XCTAssertTrue(waitUntil(timeout: 10) { client.onLoop { connection.state == .closed } })
    XCTAssertLessThan(
      Date().timeIntervalSince(idleSince), idleTimeout - 0.5, "closed by the PING, not the timeout")
    client.onLoop { XCTAssertTrue(client.pool.connections(for: client.key).isEmpty) }
  }
}
