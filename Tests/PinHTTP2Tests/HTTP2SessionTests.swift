import PinTestSupport
import XCTest

@testable import PinHTTP2

/// The codec back to back: a client session and a server session (both the
/// real nghttp2) joined in memory, bytes pumped both ways until quiet.
final class HTTP2SessionTests: XCTestCase {
  var pair: HTTP2Pair!
  var client: HTTP2Session {
    get { pair.client }
    set { pair.client = newValue }
  }
  var server: HTTP2Session {
    get { pair.server }
    set { pair.server = newValue }
  }
  var clientEvents: [HTTP2Event] {
    get { pair.clientEvents }
    set { pair.clientEvents = newValue }
  }
  var serverEvents: [HTTP2Event] {
    get { pair.serverEvents }
    set { pair.serverEvents = newValue }
  }
  var unreadByServer: Set<Int32> {
    get { pair.unreadByServer }
    set { pair.unreadByServer = newValue }
  }

  override func setUpWithError() throws {
    pair = HTTP2Pair(
      client: try HTTP2Session(role: .client),
      server: try HTTP2Session(role: .server, maxConcurrentStreams: 10))
  }

  func pump(limit: Int = 10_000) throws { try pair.pump(limit: limit) }

  static func request(_ path: String = "/", method: String = "GET") -> [HTTP2Header] {
    [
      .init(":method", method), .init(":scheme", "https"), .init(":authority", "httpbin.org"),
      .init(":path", path),
    ]
  }

  func body(of stream: Int32, in events: [HTTP2Event]) -> [UInt8] {
    events.reduce(into: []) { bytes, event in
      if case .data(stream, let chunk) = event { bytes += chunk }
    }
  }

  /// Field count and header list size hold as HPACK decodes, on received
  /// requests: the stream is reset, nothing of the block is delivered, and
  /// the HPACK state stays in step for the next request.
  func testAHeaderBlockOverTheLimitsResetsItsStreamAndTheNextOneIsServed() throws {
    var limits = HTTP2Limits()
    limits.maxHeaderFields = 20
    server = try HTTP2Session(role: .server, maxHeaderListSize: 8 * 1024, limits: limits)
    let many = Self.request("/many") + (0..<30).map { HTTP2Header("x-field-\($0)", "1") }
    // 50 fields of 1000 bytes: a few bytes each once indexed, 50 KB decoded.
    let big =
      Self.request("/big")
      + Array(repeating: HTTP2Header("x-big", String(repeating: "b", count: 1000)), count: 50)
    let first = try client.submitRequest(many)
    let second = try client.submitRequest(big)
    try pump()
    XCTAssertTrue(serverEvents.contains(.oversizedHeaders(stream: first)), "\(serverEvents)")
    XCTAssertTrue(serverEvents.contains(.oversizedHeaders(stream: second)), "\(serverEvents)")
    XCTAssertFalse(serverEvents.contains { if case .headers = $0 { true } else { false } }, "\(serverEvents)")
    XCTAssertTrue(
      clientEvents.contains(.streamClosed(stream: first, errorCode: HTTP2ErrorCode.internalError)),
      "\(clientEvents)")
    // The same fields again, within the limits: decoded against the table both blocks filled.
    let third = try client.submitRequest(Self.request("/fine") + Array(many.suffix(10)))
    try pump()
    guard
      case .headers(third, let block)? = serverEvents.first(where: {
        if case .headers = $0 { true } else { false }
      })
    else { return XCTFail("no request delivered: \(serverEvents)") }
    XCTAssertEqual(block.count, 14)
    XCTAssertEqual(block.last, HTTP2Header("x-field-29", "1"))
  }

  /// The same bounds on received responses (a client session facing an origin).
  func testAResponseHeaderBlockOverTheLimitsResetsItsStream() throws {
    client = try HTTP2Session(role: .client, maxHeaderListSize: 4 * 1024)
    let stream = try client.submitRequest(Self.request("/"))
    try pump()
    try server.submitResponse(
      stream: stream,
      [.init(":status", "200")]
        + (0..<50).map { HTTP2Header("x-r\($0)", String(repeating: "r", count: 100)) },
      body: Array("ok".utf8))
    try pump()
    XCTAssertTrue(clientEvents.contains(.oversizedHeaders(stream: stream)), "\(clientEvents)")
    XCTAssertFalse(clientEvents.contains { if case .headers = $0 { true } else { false } })
    XCTAssertTrue(clientEvents.contains { if case .streamClosed(stream, _) = $0 { true } else { false } })
  }

  func testARequestAndItsResponse() throws {
    let stream = try client.submitRequest(Self.request("/get") + [.init("user-agent", "pinproxy-test")])
    try pump()
    XCTAssertTrue(
      serverEvents.contains(
        .headers(stream: stream, Self.request("/get") + [.init("user-agent", "pinproxy-test")])))
    XCTAssertTrue(serverEvents.contains(.endStream(stream: stream)))
    try server.submitResponse(
      stream: stream, [.init(":status", "200"), .init("content-type", "text/plain")],
      body: Array("hello".utf8))
    try pump()
    XCTAssertTrue(
      clientEvents.contains(
        .headers(stream: stream, [.init(":status", "200"), .init("content-type", "text/plain")])))
    XCTAssertEqual(body(of: stream, in: clientEvents), Array("hello".utf8))
    XCTAssertTrue(clientEvents.contains(.endStream(stream: stream)))
    XCTAssertTrue(clientEvents.contains(.streamClosed(stream: stream, errorCode: 0)))
    // The server's SETTINGS reached the client.
    XCTAssertTrue(clientEvents.contains(.settings(maxConcurrentStreams: 10)))
  }

  /// Frames queued by several submissions leave in one piece (one TLS
  /// record upstream, not one per frame), then nothing is handed out twice;
  /// names and values of every length (an empty value among them) arrive
  /// as sent through the one buffer the name/value list points into.
  func testPendingFramesAreSentInOnePieceAndHeadersSurviveTheSharedBuffer() throws {
    try pump()
    let long = String(repeating: "v", count: 3000)
    let fields: [HTTP2Header] = [.init("x-empty", ""), .init("x-long", long), .init("x-z", "z")]
    let first = try client.submitRequest(Self.request("/one") + fields)
    let second = try client.submitRequest(Self.request("/two"))
    var pieces: [[UInt8]] = []
    try client.sendPending { pieces.append(Array($0)) }
    XCTAssertEqual(pieces.count, 1)
    try client.sendPending { pieces.append(Array($0)) }
    XCTAssertEqual(pieces.count, 1, "nothing is handed out twice")
    let events = try server.receive(pieces[0])
    XCTAssertTrue(events.contains(.headers(stream: first, Self.request("/one") + fields)), "\(events)")
    XCTAssertTrue(events.contains(.headers(stream: second, Self.request("/two"))), "\(events)")
    XCTAssertTrue(server.takeEvents().isEmpty)
  }

  func testABodyLargerThanTheFlowControlWindowArrivesWhole() throws {
    let upload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let stream = try client.submitRequest(Self.request("/upload", method: "POST"), body: upload)
    try pump()
    XCTAssertEqual(body(of: stream, in: serverEvents), upload)
    XCTAssertTrue(serverEvents.contains(.endStream(stream: stream)))
  }

  func testConcurrentStreamsInterleave() throws {
    let streams = try (0..<8).map { try client.submitRequest(Self.request("/\($0)")) }
    try pump()
    XCTAssertEqual(
      Set(serverEvents.compactMap { if case .endStream(let id) = $0 { id } else { nil } }), Set(streams))
    for (index, stream) in streams.enumerated().reversed() {
      try server.submitResponse(stream: stream, [.init(":status", "200")], body: Array("\(index)".utf8))
    }
    try pump()
    for (index, stream) in streams.enumerated() {
      XCTAssertEqual(body(of: stream, in: clientEvents), Array("\(index)".utf8))
    }
  }

  func testMalformedRequestsAreResetNotDelivered() throws {
    // RFC 9113 §8.2: connection-specific fields, TE other than trailers, a
    // repeated pseudo-header, and a pseudo-header after a regular field are
    // malformed. (nghttp2's own client lower-cases names, so upper case
    // cannot be sent from it.)
    let shapes: [[HTTP2Header]] = [
      Self.request() + [.init("connection", "keep-alive")],
      Self.request() + [.init("te", "gzip")],
      Self.request() + [.init(":path", "/again")],
      [
        .init(":method", "GET"), .init(":scheme", "https"), .init("accept", "*/*"), .init(":path", "/"),
        .init(":authority", "httpbin.org"),
      ],
    ]
    for bad in shapes {
      serverEvents = []
      clientEvents = []
      let stream = try client.submitRequest(bad)
      try pump()
      XCTAssertFalse(
        serverEvents.contains { if case .headers(stream, _) = $0 { true } else { false } }, "\(bad)")
      XCTAssertTrue(
        clientEvents.contains(.streamClosed(stream: stream, errorCode: HTTP2ErrorCode.protocolError)),
        "\(bad): \(clientEvents)")
    }
  }

  func testABodyThatDisagreesWithContentLengthIsReset() throws {
    let stream = try client.submitRequest(
      Self.request("/upload", method: "POST") + [.init("content-length", "10")], body: Array("short".utf8))
    try pump()
    XCTAssertTrue(
      clientEvents.contains(.streamClosed(stream: stream, errorCode: HTTP2ErrorCode.protocolError)),
      "\(clientEvents)")
    XCTAssertFalse(serverEvents.contains(.endStream(stream: stream)))
  }

  func testResetAndGoAwayReachThePeer() throws {
    let stream = try client.submitRequest(Self.request())
    try pump()
    try server.submitReset(stream: stream, errorCode: HTTP2ErrorCode.refusedStream)
    try server.submitGoAway()
    try pump()
    XCTAssertTrue(
      clientEvents.contains(.streamClosed(stream: stream, errorCode: HTTP2ErrorCode.refusedStream)))
    XCTAssertTrue(clientEvents.contains(.goAway(lastStreamID: stream, errorCode: 0)))
  }

  func testAStreamingBodyWithTrailersArrivesAsSent() throws {
    let stream = try client.submitRequest(Self.request("/upload", method: "POST"), streaming: true)
    try pump()
    XCTAssertFalse(serverEvents.contains(.endStream(stream: stream)), "the body has not ended yet")
    client.sendBody(stream: stream, Array("first ".utf8))
    try pump()
    client.sendBody(stream: stream, Array("second".utf8))
    client.endBody(stream: stream, trailers: [.init("x-checksum", "abc")])
    try pump()
    XCTAssertEqual(body(of: stream, in: serverEvents), Array("first second".utf8))
    XCTAssertTrue(serverEvents.contains(.headers(stream: stream, [.init("x-checksum", "abc")])))
    XCTAssertTrue(serverEvents.contains(.endStream(stream: stream)))
  }

  func testAnUnreadStreamStallsAloneAndResumesWhenRead() throws {
    // The server reads nothing of the slow stream: once its window is spent
    // the client holds its DATA back, while the other stream completes.
    let big = [UInt8](repeating: 7, count: 3 << 20)
    let slow = try client.submitRequest(Self.request("/slow", method: "POST"), body: big)
    unreadByServer = [slow]
    let fast = try client.submitRequest(Self.request("/fast", method: "POST"), body: Array("quick".utf8))
    try pump()
    XCTAssertEqual(body(of: fast, in: serverEvents), Array("quick".utf8))
    XCTAssertTrue(serverEvents.contains(.endStream(stream: fast)))
    let received = body(of: slow, in: serverEvents).count
    XCTAssertEqual(received, Int(HTTP2Limits().streamWindow), "exactly one stream window, then a stall")
    XCTAssertGreaterThan(client.bufferedBodyBytes(stream: slow), 0)
    // Reading it reopens the window.
    unreadByServer = []
    server.consume(stream: slow, received)
    for _ in 0..<8 {
      try pump()
      let now = body(of: slow, in: serverEvents).count
      server.consume(stream: slow, now - received)
      if serverEvents.contains(.endStream(stream: slow)) { break }
    }
    XCTAssertEqual(body(of: slow, in: serverEvents).count, big.count)
  }

  func testAPingIsAcknowledged() throws {
    try client.submitPing()
    try pump()
    XCTAssertTrue(clientEvents.contains(.pingAcknowledged))
  }

  func testARapidResetFloodEndsTheConnection() throws {
    // CVE-2023-44487: streams opened and reset at once, far past the burst.
    var limits = HTTP2Limits()
    limits.resetBurst = 20
    server = try HTTP2Session(role: .server, maxConcurrentStreams: 10, limits: limits)
    var flood = try client.pendingOutput()
    for _ in 0..<200 {
      let stream = try client.submitRequest(Self.request())
      flood += try client.pendingOutput()
      try client.submitReset(stream: stream, errorCode: HTTP2ErrorCode.cancel)
      flood += try client.pendingOutput()
    }
    serverEvents += try server.receive(flood)
    try pump()
    XCTAssertTrue(
      clientEvents.contains {
        if case .goAway(_, let code) = $0, code != HTTP2ErrorCode.noError { true } else { false }
      },
      "\(clientEvents.suffix(3))")
    XCTAssertFalse(server.isActive, "the flooding connection is finished")
  }

  func testGarbageInsteadOfThePrefaceIsAnError() throws {
    XCTAssertThrowsError(try server.receive(Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)))
  }
}
