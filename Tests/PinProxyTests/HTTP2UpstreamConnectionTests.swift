import Foundation
import PinEventLoop
import PinHTTP2
import XCTest

@testable import PinProxy

/// `HTTP2UpstreamConnection` and its streams against a real nghttp2 server
/// session (`InProcessH2Origin`) over a socket pair: which closes may be
/// retried (RFC 9113 §8.7), what GOAWAY does to the connection, and
/// per-stream back-pressure. Built directly, without a dial: the trust
/// decision before the first stream is the dialer's and is tested end to end.
final class HTTP2UpstreamConnectionTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  func testAStreamAboveAGoAwaysLastStreamMayBeRetriedAndTheOneBelowFinishes() throws {
    // Both requests reach the origin; it then says it will process only stream 1.
    let origin = InProcessH2Origin { connection, stream, _ in
      if stream == 3 { connection.goAway(lastStreamID: 1) }
    }
    defer { origin.close() }
    let client = DirectH2Client()
    let connection = try client.connect(to: origin)
    let (below, above) = (RecordingUpstreamDelegate(), RecordingUpstreamDelegate())
    let first = try XCTUnwrap(client.send("/one", on: connection, to: below))
    _ = try XCTUnwrap(client.send("/three", on: connection, to: above))

    XCTAssertTrue(waitUntil { above.close != nil }, "the stream the origin will not process is closed")
    XCTAssertNotNil(above.close?.failure)
    XCTAssertEqual(above.close?.mayRetry, true, "never processed: the request may go again elsewhere")
    client.onLoop {
      XCTAssertEqual(connection.state, .retiring, "GOAWAY retires the connection")
      XCTAssertNil(client.pool.stream(for: client.key), "the pool hands out no stream on it")
      XCTAssertTrue(client.pool.connections(for: client.key).isEmpty, "and no longer holds it")
    }

    origin.onLoop { origin.connection(0).respond(stream: 1, body: Array("one".utf8)) }
    XCTAssertTrue(waitUntil { below.ended }, "the stream below the last id still gets its response")
    XCTAssertEqual(below.status, 200)
    XCTAssertNil(below.close, "no failure for the finished stream")
    client.onLoop {
      first.release(
        to: UpstreamRelease(pool: UpstreamPool.unused(on: client.loop), idleTimeout: 60, maxIdle: 1))
    }
    XCTAssertTrue(
      waitUntil { client.onLoop { connection.state == .closed } }, "closed once its last stream ends")
  }

  func testARefusedStreamMayBeRetriedAndTheConnectionGoesOn() throws {
    let origin = InProcessH2Origin { connection, stream, request in
      if request.value(":path") == "/refuse" {
        connection.reset(stream: stream, code: HTTP2ErrorCode.refusedStream)
      } else {
        connection.respond(stream: stream, body: Array("ok".utf8))
      }
    }
    defer { origin.close() }
    let client = DirectH2Client()
    let connection = try client.connect(to: origin)
    let refused = RecordingUpstreamDelegate()
    _ = try XCTUnwrap(client.send("/refuse", on: connection, to: refused))
    XCTAssertTrue(waitUntil { refused.close != nil })
    XCTAssertNotNil(refused.close?.failure)
    XCTAssertEqual(refused.close?.mayRetry, true, "REFUSED_STREAM: the origin did not process it")

    // One refused stream does not retire the connection.
    let next = RecordingUpstreamDelegate()
    _ = try XCTUnwrap(client.send("/next", on: connection, to: next))
    XCTAssertTrue(waitUntil { next.ended })
    XCTAssertEqual(next.bodyBytes, 2)
    client.onLoop { XCTAssertEqual(connection.state, .open) }
  }

  func testAStreamTheOriginResetAfterStartingItIsNotRetried() throws {
    let origin = InProcessH2Origin { connection, stream, _ in
      connection.respondStreaming(stream: stream)
      connection.sendBody(stream: stream, Array("partial".utf8))
      // The head and part of the body left first: then the origin gives up.
      connection.reset(stream: stream, code: HTTP2ErrorCode.internalError)
    }
    defer { origin.close() }
    let client = DirectH2Client()
    let connection = try client.connect(to: origin)
    let delegate = RecordingUpstreamDelegate()
    _ = try XCTUnwrap(client.send("/", on: connection, to: delegate))
    XCTAssertTrue(waitUntil { delegate.close != nil })
    XCTAssertEqual(delegate.status, 200, "the response had started")
    XCTAssertFalse(delegate.ended)
    XCTAssertNotNil(delegate.close?.failure)
    XCTAssertEqual(delegate.close?.mayRetry, false, "a stream the origin started is never sent again")
  }

  func testAPausedStreamHoldsBackOnlyItselfWhileAnotherCompletes() throws {
    let slowSize = 8 << 20
    let fastSize = 2 << 20
    let origin = InProcessH2Origin { connection, stream, request in
      let size = request.value(":path") == "/slow" ? slowSize : fastSize
      connection.respond(stream: stream, body: [UInt8](repeating: 0x61, count: size))
    }
    defer { origin.close() }
    let client = DirectH2Client()
    let connection = try client.connect(to: origin)
    let (slow, fast) = (RecordingUpstreamDelegate(), RecordingUpstreamDelegate())
    let slowStream = try XCTUnwrap(
      client.onLoop { () -> HTTP2UpstreamStream? in
        let stream = connection.reserveStream()
        stream?.delegate = slow
        // Its reader stops taking the body (a slow client), before any arrives.
        stream?.pauseReading()
        stream?.sendHead(.get("/slow"))
        return stream
      })
    _ = try XCTUnwrap(client.send("/fast", on: connection, to: fast))

    // The fast body is twice the stream window: it needs WINDOW_UPDATEs
    // that a connection stalled by the slow stream would never send.
    XCTAssertTrue(waitUntil(timeout: 15) { fast.ended }, "fast got \(fast.bodyBytes) bytes")
    XCTAssertEqual(fast.bodyBytes, fastSize)
    Thread.sleep(forTimeInterval: 0.3)
    let window = Int(HTTP2Limits().streamWindow)
    XCTAssertLessThanOrEqual(slow.bodyBytes, window, "the paused stream got no more than its window")
    XCTAssertFalse(slow.ended)
    let heldAtOrigin = origin.onLoop { origin.connection(0).session.bufferedBodyBytes(stream: 1) }
    XCTAssertGreaterThanOrEqual(heldAtOrigin, slowSize - window, "the rest waits at the origin")

    client.onLoop { slowStream.resumeReading() }
    XCTAssertTrue(waitUntil(timeout: 15) { slow.ended }, "slow got \(slow.bodyBytes) bytes")
    XCTAssertEqual(slow.bodyBytes, slowSize)
  }
}

extension UpstreamPool {
  /// A pool nothing is released into: an h2 stream's release ignores it.
  static func unused(on loop: EventLoop) -> UpstreamPool {
    UpstreamPool(loop: loop, idleGauge: SharedCount(), pins: DynamicPinRegistry())
  }
}
