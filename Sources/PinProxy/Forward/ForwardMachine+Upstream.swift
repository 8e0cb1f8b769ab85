import PinHTTP

/// The upstream half of the forward state machine: an upstream ready or
/// failed, the response relayed with its framing decided once, the
/// connection pooled or closed, and the CONNECT tunnels' answers.
extension ForwardMachine {
  /// A connection for exchange `id`: `pooled` when taken from the pool.
  mutating func upstreamReady(
    _ upstream: Upstream, exchange id: Int, pooled: Bool, tls: UpstreamTLS,
    protocol name: UpstreamProtocol = .http1
  ) {
    guard case .connecting(var exchange) = state, exchange.id == id else {
      return actions.append(.closeUpstream(upstream))
    }
    exchange.upstreamWasPooled = pooled
    exchange.upstreamTLS = tls
    exchange.upstreamProtocol = name
    state = .exchanging(exchange, upstream)
    actions.append(.adoptUpstream(upstream))
    actions.append(
      .sendHead(
        upstream,
        ForwardedRequest(
          head: exchange.request, path: exchange.target.path, authority: exchange.target.authority)))
    actions.append(.armResponseTimer(exchange: id))
    process()
  }

  /// The dial for exchange `id` (or for the passthrough tunnel) failed.
  mutating func dialFailed(_ failure: ProxyFailure, exchange id: Int?) {
    switch state {
    case .connecting(let exchange) where exchange.id == id:
      fail(failure, request: exchange.request, target: exchange.target)
    case .openingTunnel(let head, let target?) where id == nil:
      fail(failure, request: head, target: target)
    default:
      break
    }
  }

  mutating func responseTimerFired(exchange id: Int, after seconds: Double) {
    guard case .exchanging(let exchange, _) = state, exchange.id == id, !exchange.responseStarted else {
      return
    }
    fail(
      .timeout("\(exchange.target.key) sent no response within \(seconds) s"), request: exchange.request,
      target: exchange.target)
  }

  /// Response events from `upstream`; `draining` says the proxy is shutting down.
  mutating func upstreamEvents(_ events: [HTTP1Parser.Event], from upstream: Upstream, draining: Bool) {
    guard case .exchanging(var exchange, let current) = state, current.isSame(as: upstream) else {
      return actions.append(.closeUpstream(upstream))
    }
    for event in events {
      switch event {
      case .request: break
      case .response(let head):
        relayHead(head, &exchange, draining: draining)
      case .body(let bytes):
        guard case .streaming(var stream) = exchange.response else { continue }
        stream.bodyBytes += bytes.count
        exchange.response = .streaming(stream)
        actions.append(.writeClient(stream.chunked ? HTTPSerializer.chunk(bytes) : bytes, pausing: upstream))
      case .end(let trailers):
        switch exchange.response {
        case .interim:
          exchange.response = .awaitingHead
        case .streaming(let stream):
          if stream.chunked {
            actions.append(
              .writeClient(
                HTTPSerializer.lastChunk(trailers: ForwardedHead.trailers(trailers)), pausing: upstream))
          }
          return finish(exchange, stream, upstream, draining: draining)
        case .awaitingHead:
          break
        }
      }
    }
    state = .exchanging(exchange, upstream)
  }

  private mutating func relayHead(_ head: HTTPResponseHead, _ exchange: inout Exchange, draining: Bool) {
    // An interim response does not stop the clock: the final head must still
    // come within `upstreamResponse`.
    if (100..<200).contains(head.status) {
      exchange.response = .interim
      // 101 would switch protocols, which this proxy does not relay.
      if head.status != 101 && exchange.request.version == .http11 {
        actions.append(
          .writeClient(
            HTTPSerializer.responseHead(HTTPResponseHead(status: head.status, reason: head.reason)),
            pausing: nil))
      }
      return
    }
    actions.append(.cancelResponseTimer)
    if draining { exchange.closeAfterResponse = true }
    let (bytes, framing) = ForwardedHead.response(
      head, clientVersion: exchange.request.version, closing: exchange.closeAfterResponse,
      via: ForwardedRequest.via(exchange.upstreamProtocol)
    )
    if framing == .untilClose { exchange.closeAfterResponse = true }
    exchange.response = .streaming(
      ResponseStream(status: head.status, chunked: framing == .chunked, upstreamKeepsAlive: head.keepAlive))
    actions.append(.writeClient(bytes, pausing: nil))
  }

  private mutating func finish(
    _ exchange: Exchange, _ stream: ResponseStream, _ upstream: Upstream, draining: Bool
  ) {
    actions.append(.cancelResponseTimer)
    servedRequests += 1
    if exchange.requestComplete && stream.upstreamKeepsAlive {
      actions.append(.releaseUpstream(upstream))
    } else {
      actions.append(.closeUpstream(upstream))
    }
    actions.append(
      .record(ExchangeRecord(exchange: exchange, status: stream.status, responseBytes: stream.bodyBytes)))
    // A response that ended before the request body did leaves the client's
    // stream mid-message: the connection cannot carry another request.
    if exchange.closeAfterResponse || !exchange.requestComplete || draining {
      state = .closing
      return actions.append(.closeAfterFlush)
    }
    awaitRequest()
    parseNextRequest()
  }

  mutating func upstreamDrained(_ upstream: Upstream) {
    guard case .exchanging(_, let current) = state, current.isSame(as: upstream) else { return }
    process()
  }

  /// `upstream` closed; `failure` says why when it broke a message, and
  /// `mayRetry` whether the request may go again: the connection came from
  /// the pool (an idle close the origin may have raced with our request),
  /// or the origin said it never started the stream (GOAWAY, RFC 9113 §6.8).
  mutating func upstreamClosed(_ upstream: Upstream, failure: ProxyFailure?, mayRetry: Bool) {
    guard case .exchanging(var exchange, let current) = state, current.isSame(as: upstream) else { return }
    if exchange.responseStarted {
      // Part of the response was sent: only closing tells the client it is cut short.
      state = .connecting(exchange)
      return closeNow()
    }
    // One fresh attempt, when nothing of a request body was sent.
    if mayRetry && !exchange.retried && exchange.requestBodyBytes == 0 {
      exchange.retried = true
      actions.append(.cancelResponseTimer)
      state = .connecting(exchange)
      return actions.append(.acquireUpstream(exchange: exchange.id, exchange.target, poolAllowed: false))
    }
    state = .connecting(exchange)
    fail(
      failure ?? .unreachable("\(exchange.target.key) closed the connection without a response"),
      request: exchange.request, target: exchange.target)
  }

  // MARK: CONNECT

  /// The passthrough upstream is connected: the client gets its 200 and the
  /// splice starts with whatever the client sent after the CONNECT head.
  mutating func passthroughReady() -> (early: [UInt8], clientFinished: Bool)? {
    guard case .openingTunnel = state else { return nil }
    state = .spliced
    return (parser.takeLeftover(), clientFinishedSending)
  }

  /// Interception can start: requests inside the tunnel are parsed afresh.
  /// Returns the bytes the client sent after the CONNECT head (the start of
  /// its TLS handshake).
  mutating func interceptionReady(_ target: ConnectTarget) -> [UInt8]? {
    guard case .openingTunnel = state else { return nil }
    let early = parser.takeLeftover()
    parser = HTTP1Parser(role: .request, limits: limits, pausesBetweenMessages: true)
    pending.removeAll()
    tunnel = target
    state = .awaitingRequest
    armHeaderTimer()
    actions.append(.resumeClient(unlessBackedUp: nil))
    return early
  }

  /// The client's first bytes in an intercepted tunnel were not a TLS
  /// handshake: its requests are plain HTTP for the CONNECT host.
  mutating func tunnelIsPlain() {
    tunnel?.plain = true
  }

  mutating func interceptionFailed(_ failure: ProxyFailure) {
    guard case .openingTunnel(let head, _) = state else { return }
    fail(failure, request: head)
  }
}
