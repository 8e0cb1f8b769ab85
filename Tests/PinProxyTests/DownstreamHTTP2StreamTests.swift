import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinHTTP2
import PinTrust
import XCTest

@testable import PinProxy

/// One `DownstreamHTTP2Stream` alone: a stand-in for its connection
/// (`HTTP2StreamHost`) holding the real nghttp2 server session of an
/// in-memory pair, and an upstream link that records what it is asked. What
/// the h2 client receives is read from the pair's client side.
final class DownstreamHTTP2StreamTests: XCTestCase {
  lazy var group = EventLoopGroup(count: 1)

  final class StandInHost: HTTP2StreamHost {
    let loop: EventLoop
    let wire: HTTP2BackToBack
    var codec: HTTP2Session { wire.server }
    var responseTimeout = 30.0
    var acquisitions: [Bool] = []
    var slotsTaken = 0
    var pausedStreams = 0
    var released: [ObjectIdentifier] = []
    var records: [ExchangeRecord] = []
    var refusals: [ProxyFailure] = []
    var pausesUpstreams = false
    var acknowledged = 0

    init(loop: EventLoop) throws {
      self.loop = loop
      wire = try HTTP2BackToBack()
    }

    func holds(_ stream: DownstreamHTTP2Stream) -> Bool { true }
    func acknowledge(_ stream: Int32, _ count: Int) { acknowledged += count }
    func acquire(for stream: DownstreamHTTP2Stream, poolAllowed: Bool) { acquisitions.append(poolAllowed) }
    func pausesUpstream(of stream: DownstreamHTTP2Stream) -> Bool { pausesUpstreams }
    func upstreamPaused(_ paused: Bool) { pausedStreams += paused ? 1 : -1 }
    func upstreamSlot(taken: Bool) { slotsTaken += taken ? 1 : -1 }
    func release(_ link: any UpstreamLink) { released.append(ObjectIdentifier(link)) }
    func report(_ record: ExchangeRecord) { records.append(record) }
    func refuse(_ stream: DownstreamHTTP2Stream, _ failure: ProxyFailure) { refusals.append(failure) }
    func flush() {}
  }

  /// An upstream link that only records.
  final class RecordingLink: UpstreamLink {
    let key: UpstreamKey
    let tls = UpstreamTLS.none
    let protocolName = WireProtocol.http1
    let reusedFromPool = false
    let mayRetryAfterClose = false
    weak var delegate: (any UpstreamDelegate)?
    var isAboveHighWatermark = false
    var heads: [ForwardedRequest] = []
    var body: [UInt8] = []
    var ended = false
    var paused = false
    var closed = false

    init(key: UpstreamKey) { self.key = key }
    func sendHead(_ request: ForwardedRequest) { heads.append(request) }
    func sendBody(_ bytes: [UInt8]) { body += bytes }
    func endBody(trailers: HTTPHeaders) { ended = true }
    func pauseReading() { paused = true }
    func resumeReading() { paused = false }
    func release(to context: UpstreamRelease) { XCTFail("the stream releases through its host") }
    func close() { closed = true }
  }

  /// A stream for the request the h2 client sent on the wire, routed as the
  /// forward listener routes `origin.test` inside its tunnel.
  func makeStream(_ host: StandInHost, method: String = "GET", extra: [HTTP2Header] = []) throws
    -> DownstreamHTTP2Stream
  {
    // A request with a body leaves its stream open for the DATA to come.
    let hasBody = method != "GET"
    let id = try host.wire.client.submitRequest(
      [
        .init(":method", method), .init(":scheme", "https"), .init(":authority", "origin.test"),
        .init(":path", "/a"),
      ] + extra, streaming: hasBody)
    try host.wire.pump()
    guard
      case .headers(id, let block)? = host.wire.serverEvents.last(where: {
        if case .headers = $0 { true } else { false }
      }), case .success(let head) = HTTP2Mapping.requestHead(block, endsStream: !hasBody)
    else { throw StreamTestError("the request did not reach the server side as one head") }
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward}
      domains:
        - {domain: origin.test, allowsInsecureHTTPLoads: true}
      """, file: "stream.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    var router = ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0])
    let tunnel = ConnectTarget(host: try XCTUnwrap(TrustHost("origin.test")), port: 80, plain: true)
    guard case .forward(let target) = router.route(head, inside: tunnel) else {
      throw StreamTestError("origin.test is not forwarded")
    }
    let exchange = Exchange(id: 1, request: head, target: target, clientProtocol: .http2, started: 0)
    return DownstreamHTTP2Stream(id: id, exchange: exchange, host: host)
  }

  /// A whole request, started and given `link` as its upstream (on the loop).
  func connect(_ stream: DownstreamHTTP2Stream, to link: RecordingLink) {
    stream.requestEnd(HTTPHeaders())
    stream.run { $0.start(&$1) }
    let deadline = Self.responseDeadline(on: stream.host.loop)
    let handle = stream.holdUpstream(link)
    stream.run {
      $0.upstreamReady(
        handle, pooled: false, tls: .none, protocol: .http1, responseDeadline: deadline, &$1)
    }
  }

  /// The response deadline a session gives a stream's upstream: a minute
  /// from the loop's now (a deadline counted from 0 has long passed, and
  /// the stream's timer would refuse the exchange at once).
  static func responseDeadline(on loop: EventLoop) -> Deadline { Deadline(seconds: 60, from: loop.now) }

  /// Response bytes from the upstream, parsed as its link would and handed to the stream.
  func respond(
    _ text: String, from link: RecordingLink, to stream: DownstreamHTTP2Stream, parser: inout HTTP1Parser
  )
    throws
  {
    let events = try parser.feed(Array(text.utf8))
    lending(events) { stream.upstream(link, didReceive: $0) }
  }

  struct StreamTestError: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
  }

  func testAnExchangeIsAcquiredSentAnsweredOnTheStreamAndReleasedThroughTheHost() throws {
    let loop = group.next()
    let host = try StandInHost(loop: loop)
    let stream = try makeStream(host)
    let link = RecordingLink(key: stream.target.key)
    try loop.runAndWait {
      stream.requestEnd(HTTPHeaders())
      stream.run { $0.start(&$1) }
      XCTAssertEqual(host.acquisitions, [true])
      XCTAssertEqual(host.slotsTaken, 1, "acquiring takes one of the connection's upstream slots")
      let handle = stream.holdUpstream(link)
      stream.run {
        $0.upstreamReady(
          handle, pooled: false, tls: .none, protocol: .http1,
          responseDeadline: Self.responseDeadline(on: loop), &$1)
      }
      XCTAssertEqual(link.heads.count, 1)
      XCTAssertEqual(link.heads.first?.path, "/a")
      XCTAssertTrue(link.delegate === stream, "the stream reads its own upstream")
      var parser = HTTP1Parser(role: .response, limits: HTTPLimits(), pausesBetweenMessages: true)
      parser.expectResponse(to: "GET")
      let events = try parser.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))
      lending(events) { stream.upstream(link, didReceive: $0) }
    }
    try host.wire.pump()
    XCTAssertEqual(host.wire.blocks(stream.id).first?[field: ":status"], "200")
    XCTAssertEqual(host.wire.blocks(stream.id).first?[field: "via"], "1.1 pinproxy")
    XCTAssertEqual(host.wire.body(stream.id), Array("ok".utf8))
    XCTAssertTrue(host.wire.ended(stream.id))
    XCTAssertEqual(host.released, [ObjectIdentifier(link)])
    XCTAssertFalse(link.closed)
    XCTAssertEqual(host.records.map(\.status), [200])
    XCTAssertEqual(host.slotsTaken, 0, "the finished exchange gave its slot back")
    XCTAssertTrue(host.refusals.isEmpty)
  }

  func testAFailedDialIsRefusedThroughTheHostAndFreesTheSlot() throws {
    let loop = group.next()
    let host = try StandInHost(loop: loop)
    let stream = try makeStream(host)
    loop.runAndWait {
      stream.requestEnd(HTTPHeaders())
      stream.run { $0.start(&$1) }
      stream.run { $0.dialFailed(.unreachable("origin.test:80 refused the connection"), &$1) }
    }
    XCTAssertEqual(host.refusals.map(\.code), [.upstreamUnreachable])
    XCTAssertEqual(host.slotsTaken, 0)
    XCTAssertTrue(host.records.isEmpty)
  }

  func testABackedUpClientPausesTheUpstreamAndAbandoningCountsItResumed() throws {
    let loop = group.next()
    let host = try StandInHost(loop: loop)
    let stream = try makeStream(host)
    let link = RecordingLink(key: stream.target.key)
    try loop.runAndWait {
      connect(stream, to: link)
      host.pausesUpstreams = true
      var parser = HTTP1Parser(role: .response, limits: HTTPLimits(), pausesBetweenMessages: true)
      parser.expectResponse(to: "GET")
      try respond(
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", from: link, to: stream, parser: &parser)
      XCTAssertTrue(link.paused)
      XCTAssertEqual(host.pausedStreams, 1)
      host.pausesUpstreams = false
      stream.resumeUpstreamIfAllowed()
      XCTAssertFalse(link.paused)
      XCTAssertEqual(host.pausedStreams, 0)
      host.pausesUpstreams = true
      try respond("wor", from: link, to: stream, parser: &parser)
      XCTAssertEqual(host.pausedStreams, 1)
      stream.abandon()
    }
    XCTAssertEqual(host.pausedStreams, 0, "an abandoned stream is no longer counted as paused")
    XCTAssertTrue(link.closed, "a response cut off by the client closes its upstream")
    XCTAssertEqual(host.slotsTaken, 0)
  }

  func testRequestBodyTheUpstreamCannotTakeIsNotAcknowledgedUntilItDrains() throws {
    let loop = group.next()
    let host = try StandInHost(loop: loop)
    let stream = try makeStream(host, method: "POST", extra: [.init("content-length", "4")])
    let link = RecordingLink(key: stream.target.key)
    loop.runAndWait {
      stream.run { $0.start(&$1) }
      let handle = stream.holdUpstream(link)
      stream.run {
        $0.upstreamReady(
          handle, pooled: false, tls: .none, protocol: .http1,
          responseDeadline: Self.responseDeadline(on: loop), &$1)
      }
      link.isAboveHighWatermark = true
      stream.requestBody(Array("data".utf8))
      XCTAssertEqual(link.body, Array("data".utf8))
    }
    XCTAssertEqual(host.acknowledged, 0, "nothing acknowledged while the upstream is backed up")
    loop.runAndWait {
      link.isAboveHighWatermark = false
      stream.upstreamDidDrain(link)
    }
    XCTAssertEqual(host.acknowledged, 4)
  }
}
