import PinHTTP
import PinHTTP2

/// One exchange on a shared HTTP/2 upstream connection: what the forward
/// machine holds instead of a connection of its own. Response frames come
/// out as the same events the HTTP/1.1 parser gives (`HTTP2Mapping`), so
/// the machine relays them the same way; a response without a length is
/// re-framed as chunked for the client.
///
/// Back-pressure is per stream: while the session pauses it (its client is
/// slow), the DATA it receives is not consumed, so no WINDOW_UPDATE lets the
/// origin send more on this stream; other streams go on.
///
/// Confined to its connection's loop.
final class HTTP2UpstreamStream: UpstreamLink {
  enum State {
    /// Handed out; no head sent yet.
    case reserved
    case open(Int32)
    /// The origin ended the response (END_STREAM).
    case ended(Int32)
    case closed
  }

  let connection: HTTP2UpstreamConnection
  var key: UpstreamKey { connection.key }
  var tls: UpstreamTLS { connection.tls }
  let protocolName = WireProtocol.http2
  let reusedFromPool: Bool
  private var wasRefusedUnprocessed = false
  var mayRetryAfterClose: Bool { wasRefusedUnprocessed }
  /// Held strongly, as `UpstreamConnection.delegate` is: let go of when
  /// the exchange releases or closes the stream, or its close is reported.
  var delegate: (any UpstreamDelegate)?
  private(set) var state = State.reserved
  private var method = "GET"
  private var paused = false
  /// DATA received while paused, consumed (window reopened) on resume.
  private var unconsumed = 0
  private var trailers = HTTPHeaders()
  private var hasFinalHead = false
  private var interimResponses = 0
  /// The origin broke the exchange in a way only this stream sees (too many
  /// interim responses): delivered as a close, and the stream is reset.
  private var broken: ProxyFailure?
  /// Events gathered during one read, delivered together.
  private var pending: [HTTP1Parser.Event] = []
  /// The events of one delivery, body bytes lent (reused).
  private var lent = BorrowedEvents()
  /// The body was above the high watermark: tell the session when it drains.
  var reportsDrain = false
  /// Counts against the connection's streams until `finished`.
  var connectionSlotHeld = true
  static let highWatermark = 256 * 1024

  init(connection: HTTP2UpstreamConnection, reused: Bool) {
    self.connection = connection
    reusedFromPool = reused
  }

  var id: Int32? {
    switch state {
    case .open(let id), .ended(let id): id
    case .reserved, .closed: nil
    }
  }

  var isAboveHighWatermark: Bool {
    guard let id else { return false }
    return connection.bufferedBodyBytes(stream: id) > Self.highWatermark || connection.isAboveHighWatermark
  }

  func sendHead(_ request: ForwardedRequest) {
    guard case .reserved = state else { return }
    method = request.head.method
    let block = HTTP2Mapping.request(
      request.head, path: request.path, authority: request.authority, via: request.via)
    let hasBody: Bool
    switch request.head.framing {
    case .none, .length(0): hasBody = false
    default: hasBody = true
    }
    guard let id = connection.submit(self, block, hasBody: hasBody) else {
      state = .closed
      return
    }
    state = .open(id)
  }

  func sendBody(_ bytes: [UInt8]) {
    guard case .open(let id) = state, !bytes.isEmpty else { return }
    connection.sendBody(stream: id, bytes)
    if isAboveHighWatermark { reportsDrain = true }
  }

  func endBody(trailers: HTTPHeaders) {
    guard let id else { return }
    connection.endBody(stream: id, trailers: HTTP2Mapping.trailerBlock(trailers))
  }

  func pauseReading() { paused = true }

  func resumeReading() {
    paused = false
    guard let id, unconsumed > 0 else { return }
    connection.consume(stream: id, unconsumed)
    unconsumed = 0
  }

  /// The exchange is over: the stream's slot goes back to the connection.
  func release(to release: UpstreamRelease) {
    delegate = nil
    connection.finished(self)
  }

  /// Resets the stream unless it is already gone: also one whose response
  /// ended while our request body had not (the origin answered early), or
  /// nghttp2 would keep waiting for the rest of that body.
  func close() {
    delegate = nil
    if let id { connection.reset(stream: id) }
    state = .closed
    connection.finished(self)
  }

  // MARK: Frames from the connection

  /// A response head (interim ones end at once, as the HTTP/1.1 parser
  /// reports them), or after the final head the trailers.
  func received(headers block: [HTTP2Header]) {
    guard case .open = state, broken == nil else { return }
    if hasFinalHead { return trailers = HTTP2Mapping.trailers(block) }
    guard let head = HTTP2Mapping.response(block, requestMethod: method) else { return }
    if head.status < 200 {
      // As many interim responses as an HTTP/1.1 origin may send, no more.
      interimResponses += 1
      guard interimResponses <= HTTP1Parser.maxInterimResponses else {
        broken = .unreachable("\(key) sent more than \(HTTP1Parser.maxInterimResponses) interim responses")
        return
      }
    }
    pending.append(.response(head))
    if head.status < 200 {
      pending.append(.end(trailers: HTTPHeaders()))
    } else {
      hasFinalHead = true
    }
  }

  func received(data bytes: [UInt8]) {
    guard case .open(let id) = state else { return }
    pending.append(.body(bytes))
    if paused {
      unconsumed += bytes.count
    } else {
      connection.consume(stream: id, bytes.count, flushing: false)
    }
  }

  func receivedEnd() {
    guard case .open(let id) = state else { return }
    state = .ended(id)
    pending.append(.end(trailers: trailers))
  }

  /// The stream closed; `failure` is nil when it ended with its response.
  /// `unprocessed`: the origin never started it (REFUSED_STREAM, or above
  /// a GOAWAY's last stream id), so the request may be sent again.
  func closedByPeer(failure: @autoclosure () -> ProxyFailure, unprocessed: Bool) -> ProxyFailure? {
    let wasEnded = if case .ended = state { true } else { false }
    state = .closed
    wasRefusedUnprocessed = unprocessed
    return wasEnded ? nil : failure()
  }

  /// Hands the gathered events over, each DATA piece lent from its own
  /// array: one call per piece, carrying the events before it (joining the
  /// pieces into one buffer would copy every body byte once more).
  /// A delegate that let go of the stream in one call gets none of the rest.
  private func deliverPending() {
    var events: [HTTP1Parser.Event] = []
    swap(&events, &pending)
    for event in events {
      guard case .body(let bytes) = event else {
        lent.append(event)
        continue
      }
      bytes.withUnsafeBytes { piece in
        lent.appendBody(piece)
        delegate?.upstream(self, didReceive: lent.list)
      }
      lent.removeAll()
    }
    if !lent.isEmpty { delegate?.upstream(self, didReceive: lent.list) }
    lent.removeAll()
    events.removeAll(keepingCapacity: true)
    if pending.isEmpty { swap(&events, &pending) }
  }

  /// Delivers what one read brought, then a close if there was one.
  func deliver(closing failure: ProxyFailure?) {
    if !pending.isEmpty { deliverPending() }
    if let failure {
      let told = delegate
      delegate = nil
      return told?.upstreamDidClose(self, failure: failure) ?? ()
    }
    if let broken {
      self.broken = nil
      let told = delegate
      close()
      told?.upstreamDidClose(self, failure: broken)
    }
  }
}
