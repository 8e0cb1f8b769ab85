import Foundation
import PinEventLoop
import PinTestSupport
import XCTest

@testable import PinProxy

/// `UpstreamAcquirer` on the real dial path: a `ProxyContext` compiled
/// from YAML, `UpstreamDialer` (resolve, connect, TLS with ALPN `h2, http/1.1`,
/// the trust decision), `HTTP2UpstreamPool` and `HTTP2UpstreamConnection`,
/// against `InProcessH2Origin.listenTLS()`, PinTLS's own server side
/// selecting `h2` under a leaf that chains to the rule's anchor. The origin
/// counts the TCP connections the acquirer opened.
final class UpstreamAcquirerTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  func testAcquisitionsDuringTheFirstDialShareItsConnection() throws {
    let origin = InProcessH2Origin(respond: InProcessH2Origin.answering(Array("ok".utf8)))
    defer { origin.close() }
    let harness = try AcquirerHarness(originPort: try origin.listenTLS())
    let results = AcquiredLinks()
    harness.acquire(4, into: results)
    XCTAssertTrue(waitUntil(timeout: 10) { results.count == 4 }, "\(results.count) of 4 completed")
    XCTAssertEqual(results.failures.count, 0, "\(results.failures)")
    let streams = results.streams
    XCTAssertEqual(streams.count, 4, "every acquisition got an h2 stream")
    XCTAssertTrue(streams.allSatisfy { $0.connection === streams[0].connection }, "all on one connection")
    XCTAssertEqual(origin.connectionCount, 1, "one dial for four acquisitions")

    for (index, stream) in streams.enumerated() {
      let response = harness.exchange("/\(index)", on: stream)
      XCTAssertEqual(response.status, 200)
      XCTAssertEqual(response.bodyBytes, 2)
    }
    XCTAssertEqual(origin.onLoop { origin.connection(0).requests.count }, 4, "the origin got all four on it")
    XCTAssertEqual(origin.connectionCount, 1)
    for stream in streams { harness.release(stream) }
  }

  func testAcquisitionsThatJoinedAFailedDialGetItsFailure() throws {
    let origin = InProcessH2Origin(respond: InProcessH2Origin.answering([]))
    defer { origin.close() }
    // The origin's chain does not hold root B's key: every handshake is refused after it completes.
    let harness = try AcquirerHarness(
      originPort: try origin.listenTLS(),
      rule: ", pinningMode: publicKey, pinnedCertificates: [\"\(Fixtures.path("root-b.pem"))\"]")
    let results = AcquiredLinks()
    harness.acquire(3, into: results)
    XCTAssertTrue(waitUntil(timeout: 10) { results.count == 3 }, "\(results.count) of 3 completed")
    let failures = results.failures
    XCTAssertEqual(failures.count, 3, "every acquisition failed")
    XCTAssertTrue(
      failures.allSatisfy { $0.code == failures.first?.code && $0.reason == failures.first?.reason })
    Thread.sleep(forTimeInterval: 0.3)
    XCTAssertEqual(origin.connectionCount, 1, "the waiters got the dial's failure instead of dialling again")
  }

  func testAfterGoAwayTheNextAcquisitionDialsANewConnection() throws {
    // "/hold" is answered only when the test says: its stream is still open
    // when the GOAWAY arrives, so nghttp2 alone would keep the connection up.
    let origin = InProcessH2Origin { connection, stream, request in
      guard request.value(":path") != "/hold" else { return }
      connection.respond(stream: stream, body: Array("ok".utf8))
    }
    defer { origin.close() }
    let harness = try AcquirerHarness(originPort: try origin.listenTLS())
    let first = try XCTUnwrap(try harness.acquireOne()?.get() as? HTTP2UpstreamStream)
    XCTAssertEqual(harness.exchange("/first", on: first).status, 200)
    harness.release(first)
    let held = try XCTUnwrap(try harness.acquireOne()?.get() as? HTTP2UpstreamStream)
    XCTAssertTrue(held.connection === first.connection, "before GOAWAY the connection is reused")
    let heldResponse = RecordingUpstreamDelegate()
    harness.onLoop {
      held.delegate = heldResponse
      held.sendHead(.get("/hold"))
    }
    XCTAssertTrue(waitUntil { origin.onLoop { origin.connection(0).requests.count == 2 } })

    // The origin will process nothing after stream 3, the held one.
    origin.onLoop { origin.connection(0).goAway(lastStreamID: 3) }
    XCTAssertTrue(waitUntil { harness.onLoop { first.connection.state == .retiring } }, "the GOAWAY arrived")
    let next = try XCTUnwrap(try harness.acquireOne()?.get() as? HTTP2UpstreamStream)
    XCTAssertFalse(next.connection === first.connection, "the going-away connection is not handed out")
    XCTAssertEqual(origin.connectionCount, 2, "a new dial")
    XCTAssertEqual(harness.exchange("/next", on: next).status, 200)
    harness.release(next)

    // The stream the origin kept still finishes; then the connection closes.
    origin.onLoop { origin.connection(0).respond(stream: 3, body: Array("held".utf8)) }
    XCTAssertTrue(waitUntil { heldResponse.ended })
    XCTAssertNil(heldResponse.close)
    harness.release(held)
    XCTAssertTrue(waitUntil { harness.onLoop { first.connection.state == .closed } })
  }

  func testPastAFullConnectionAnotherIsOpenedAndAFreedSlotIsUsedAgain() throws {
    let origin = InProcessH2Origin(
      maxConcurrentStreams: 1, respond: InProcessH2Origin.answering(Array("ok".utf8)))
    defer { origin.close() }
    let harness = try AcquirerHarness(originPort: try origin.listenTLS())
    let first = try XCTUnwrap(try harness.acquireOne()?.get() as? HTTP2UpstreamStream)
    XCTAssertTrue(
      waitUntil { harness.onLoop { !first.connection.hasCapacity } },
      "the origin's limit of one stream arrived")

    let second = try XCTUnwrap(try harness.acquireOne()?.get() as? HTTP2UpstreamStream)
    XCTAssertFalse(second.connection === first.connection, "no second stream on a full connection")
    XCTAssertEqual(origin.connectionCount, 2)

    XCTAssertEqual(harness.exchange("/first", on: first).status, 200)
    harness.release(first)
    let third = try XCTUnwrap(try harness.acquireOne()?.get() as? HTTP2UpstreamStream)
    XCTAssertTrue(third.connection === first.connection, "the freed slot serves the next acquisition")
    XCTAssertTrue(third.reusedFromPool)
    XCTAssertEqual(origin.connectionCount, 2, "no third dial")
    XCTAssertEqual(harness.exchange("/third", on: third).status, 200)
    harness.release(second)
    harness.release(third)
  }
}
