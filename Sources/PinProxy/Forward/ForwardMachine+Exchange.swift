import PinHTTP

/// The exchange half of the HTTP/1.1 connection machine: upstream events go
/// to the current `ExchangeMachine`. Its upstream-side actions pass through
/// unchanged for the session to carry out (`ExchangeHost`); its response
/// side is this connection's — framed by `HTTP1Downstream`, its outcome
/// deciding whether the connection serves another request.
extension ForwardMachine {
  /// Reads the current exchange in place; nil when there is none. Reading
  /// `exchange?.x` as a value copies the whole machine first (its head and
  /// buffers retained and released) to read one field; an inout access
  /// projects into the stored optional.
  @inline(__always)
  mutating func inExchange<R>(_ read: (inout ExchangeMachine<Upstream>) -> R) -> R? {
    guard exchange != nil else { return nil }
    return read(&exchange!)
  }

  /// The response bytes `writeClient` actions name (read with a range of theirs).
  var clientOutput: [UInt8] { response.output }

  /// Every action taken so far was carried out, its writes included: the
  /// output buffer is emptied for the next response (its storage kept).
  mutating func clientOutputWritten() { response.outputWritten() }

  /// The request of exchange `id` as its upstream link sends it, while it is
  /// the current one. Read in place: binding the optional exchange would copy
  /// the whole exchange machine.
  mutating func forwardedRequest(exchange id: Int) -> ForwardedRequest? {
    inExchange { $0.exchange.id == id ? $0.forwardedRequest : nil } ?? nil
  }

  /// The finished exchange's record, for its access line; held no longer.
  mutating func takeFinishedRecord() -> ExchangeRecord? {
    // Moved out, not copied and then cleared (a record holds the head).
    finishedRecord.take()
  }

  /// A connection for exchange `id`: `pooled` when taken from the pool.
  /// Its response head must come within `responseTimeout` seconds.
  mutating func upstreamReady(
    _ upstream: Upstream, exchange id: Int, pooled: Bool, tls: UpstreamTLS,
    protocol name: WireProtocol = .http1, responseTimeout: Double
  ) {
    guard case .exchanging = state, inExchange({ $0.exchange.id }) == id else {
      return actions.append(.upstream(.closeUpstream(upstream)))
    }
    exchange!.upstreamReady(
      upstream, pooled: pooled, tls: tls, protocol: name,
      responseDeadline: Deadline(seconds: responseTimeout, from: clock()), &exchangeActions)
    runExchangeActions()
    process()
  }

  /// The dial for exchange `id` (or for the passthrough tunnel) failed.
  mutating func dialFailed(_ failure: ProxyFailure, exchange id: Int?) {
    switch state {
    case .exchanging where inExchange({ $0.exchange.id }) == id:
      exchange!.dialFailed(failure, &exchangeActions)
      runExchangeActions()
    case .openingTunnel(let head, let target?) where id == nil:
      fail(failure, request: head, target: target)
    default:
      break
    }
  }

  /// When the current exchange's response head must have come
  /// (`ExchangeMachine.responseDeadline`): the session's timer follows it.
  var responseDeadline: Deadline? { mutating get { inExchange { $0.responseDeadline } ?? nil } }

  /// The session's timer fired for the response deadline at `now`.
  mutating func responseDeadlineReached(now: UInt64) {
    guard case .exchanging = state, exchange != nil else { return }
    exchange!.timeout(now: now, &exchangeActions)
    runExchangeActions()
  }

  /// Response events from `upstream`; `draining` says the proxy is shutting down.
  mutating func upstreamEvents(_ events: [HTTP1Parser.BorrowedEvent], from upstream: Upstream, draining: Bool)
  {
    guard case .exchanging = state, exchange != nil else {
      return actions.append(.upstream(.closeUpstream(upstream)))
    }
    self.draining = self.draining || draining
    exchange!.upstreamEvents(events, from: upstream, &exchangeActions)
    runExchangeActions()
  }

  mutating func upstreamDrained(_ upstream: Upstream) {
    guard case .exchanging = state, inExchange({ $0.isServed(by: upstream) }) == true else { return }
    process()
  }

  /// `upstream` closed; the exchange decides between retrying, refusing and
  /// cutting the response short.
  mutating func upstreamClosed(_ upstream: Upstream, failure: ProxyFailure?, mayRetry: Bool) {
    guard case .exchanging = state, exchange != nil else { return }
    exchange!.upstreamClosed(upstream, failure: failure, mayRetry: mayRetry, &exchangeActions)
    runExchangeActions()
  }

  /// Hands on what the current exchange asked: the upstream side as it is,
  /// the response side framed for this client.
  mutating func runExchangeActions() {
    while let action = exchangeActions.popFirst() {
      switch consume action {
      case .response(let responseSide):
        // Refused or cut short already: nothing more of it reaches the client.
        guard case .exchanging = state, exchange != nil else { continue }
        respond(responseSide)
      case .upstream(let upstreamSide):
        if case .record = upstreamSide {
          // Kept here: by the time the session reports it, `.finished` may
          // have let the exchange go and the next request begun.
          finishedRecord = inExchange { $0.record } ?? nil
        }
        actions.append(.upstream(upstreamSide))
      }
    }
  }

  /// The response side of an exchange action, on this connection.
  private mutating func respond(_ action: ResponseAction<Upstream>) {
    switch action {
    case .respondInterim(let head):
      response.sendInterim(head)
      writeResponse(pausing: nil)
    case .respondHead:
      guard let head = exchange!.takeResponseHead() else { break }
      if draining { response.closing = true }
      _ = response.sendHead(head, upstreamProtocol: inExchange { $0.exchange.upstreamProtocol }!)
      writeResponse(pausing: nil)
    case .respondBody(let bytes, let upstream):
      response.sendBody(bytes)
      writeResponse(pausing: upstream)
    case .respondEnd(let trailers, let upstream):
      response.end(trailers: trailers)
      writeResponse(pausing: upstream)
    case .refuse(let failure):
      let refused = exchange!.exchange
      fail(failure, request: refused.request, target: refused.target)
    case .cutShort:
      // Part of the response was sent: only closing tells the client it is cut short.
      closeNow()
    case .finished:
      servedRequests += 1
      let requestComplete = inExchange { $0.exchange.requestComplete }!
      // The request head's storage serves the next request's head.
      parser.recycle(inExchange { $0.exchange.request.headers }!)
      exchange = nil
      // A response that ended before the request body did leaves the client's
      // stream mid-message: the connection cannot carry another request.
      if response.closing || response.endsWithConnection || !requestComplete || draining {
        state = .closing
        return actions.append(.closeAfterFlush)
      }
      parseNextRequest()
    }
  }

  private mutating func writeResponse(pausing upstream: Upstream?) {
    if let range = response.takeOutputRange() { actions.append(.writeClient(range, pausing: upstream)) }
  }
}
