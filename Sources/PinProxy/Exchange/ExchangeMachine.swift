import PinHTTP

/// What the exchange machine asks its session to do. Upstream actions go to
/// the `UpstreamLink`; `respond…` actions to the client's `DownstreamLink`,
/// which frames them in the client's protocol.
/// What an exchange asks, in order: of its upstream side, carried out the
/// same way whichever the client's protocol (`ExchangeHost.performUpstreamSide`),
/// or of its response side, which the client's protocol frames (the
/// HTTP/1.1 machine, or an HTTP/2 stream). One queue keeps the order
/// between the halves (a close before a refusal, the record before the end).
enum ExchangeAction<Upstream: SameUpstream> {
  case upstream(UpstreamAction<Upstream>)
  case response(ResponseAction<Upstream>)
}

/// The upstream half of an exchange's actions.
enum UpstreamAction<Upstream: SameUpstream> {
  /// Take a pooled connection or dial one; answer `upstreamReady` or `dialFailed`.
  case acquireUpstream(poolAllowed: Bool)
  /// Become the upstream's delegate and send exchange `exchange`'s request
  /// head (the link frames it for its protocol). The action names the
  /// exchange; the request is read from the machine (`forwardedRequest`),
  /// so no action carries a head: an action stays a few words, and nothing
  /// is allocated to box one.
  case sendHead(Upstream, exchange: Int)
  case sendBody(Upstream, [UInt8])
  /// The request body ended, with these trailers (chunked or HTTP/2 only).
  case endBody(Upstream, HTTPHeaders)
  /// The exchange is done: keep the link's connection for reuse.
  case releaseUpstream(Upstream)
  case closeUpstream(Upstream)
  /// The exchange's access line and metrics: its record is the machine's
  /// (`record`), read by whoever reports it.
  case record
}

/// The response half of an exchange's actions: what the client is told.
enum ResponseAction<Upstream: SameUpstream> {
  /// A 1xx response, relayed where the client's protocol carries it.
  indirect case respondInterim(HTTPResponseHead)
  /// The final response head, kept in the machine (`responseHead`);
  /// `Upstream` is read again once the client drains.
  case respondHead(Upstream)
  /// Body bytes lent from the upstream's read: whoever runs this action
  /// copies them on before the event that produced it returns (both
  /// runners empty their queue inside the upstream's delegate call).
  case respondBody(UnsafeRawBufferPointer, Upstream)
  case respondEnd(HTTPHeaders, Upstream)
  /// Answer the failure: nothing of the response went out.
  indirect case refuse(ProxyFailure)
  /// Part of the response went out and the rest never will: the client
  /// learns it only from a close (HTTP/1.1) or a reset (HTTP/2).
  case cutShort
  /// The response was relayed to its end (after `record`).
  case finished
}

/// One exchange from routing to its access line, without I/O and without
/// knowing the client's protocol: it takes what happened (the upstream
/// ready or closed, request body, response events, the timer) and queues
/// `ExchangeAction`s. The HTTP/1.1 connection machine (`ForwardMachine`)
/// runs one per request; the HTTP/2 session one per stream. Every decision
/// about an exchange — retry once, release or close, the timeout's text, a
/// refusal — is made here and nowhere else.
struct ExchangeMachine<Upstream: SameUpstream> {
  typealias Actions = RingBuffer<ExchangeAction<Upstream>>

  enum Phase {
    /// Routed, not acquiring yet: an HTTP/2 stream holding its small body
    /// until complete, or waiting for one of its connection's upstream slots.
    case waiting
    /// Its upstream is being acquired.
    case connecting
    /// Request and response flow over `Upstream`.
    case exchanging(Upstream)
    /// Relayed to the end, refused or cut short.
    case done
  }

  private(set) var exchange: Exchange
  private(set) var phase = Phase.waiting
  /// The final response head, from its arrival until the client's link
  /// takes it to frame (`takeResponseHead`): `respondHead` names it.
  private(set) var responseHead: HTTPResponseHead?
  /// Request body that arrived before the upstream was ready (HTTP/2 only:
  /// an HTTP/1.1 connection stops reading instead). The client's stream
  /// window bounds it: nothing here is acknowledged until forwarded.
  private var heldBody: [[UInt8]] = []
  /// While the request is upstream and no final response head has come:
  /// when it must have. Machine state, not a timer: the host arms its one
  /// loop timer for it after each run and calls `timeout(now:)`.
  private(set) var responseDeadline: Deadline?

  init(_ exchange: Exchange) { self.exchange = exchange }

  var isDone: Bool { if case .done = phase { true } else { false } }
  var isWaiting: Bool { if case .waiting = phase { true } else { false } }
  var isConnecting: Bool { if case .connecting = phase { true } else { false } }
  var upstream: Upstream? { if case .exchanging(let upstream) = phase { upstream } else { nil } }
  /// Acquiring or holding an upstream. A pattern without a binding: asked
  /// for every stream of a connection, it must not retain each upstream.
  var usesUpstream: Bool {
    switch phase {
    case .connecting, .exchanging: true
    case .waiting, .done: false
    }
  }
  var hasUpstream: Bool { if case .exchanging = phase { true } else { false } }

  /// The request as the upstream link sends it: the client's head, the
  /// origin-form target, the authority and this hop's `Via`. A value made
  /// where it is sent, from the exchange, never stored.
  var forwardedRequest: ForwardedRequest {
    ForwardedRequest(
      head: exchange.request, path: exchange.target.path, authority: exchange.target.authority,
      via: ForwardedRequest.via(exchange.clientProtocol))
  }

  /// The head `respondHead` named, handed over once: held no longer, so
  /// the upstream parser's storage it lies in is free for the next response.
  mutating func takeResponseHead() -> HTTPResponseHead? { responseHead.take() }

  /// What the exchange was, once its response has started (for the access
  /// line and metrics, after `record`).
  var record: ExchangeRecord? {
    guard case .streaming(let stream) = exchange.response else { return nil }
    return ExchangeRecord(exchange: exchange, status: stream.status, responseBytes: stream.bodyBytes)
  }

  /// Whether `upstream` is the one serving this exchange.
  func isServed(by upstream: Upstream) -> Bool { self.upstream?.isSame(as: upstream) ?? false }

  // MARK: Request

  /// Starts acquiring an upstream.
  mutating func start(_ out: inout Actions) {
    guard case .waiting = phase else { return }
    phase = .connecting
    out.append(.upstream(.acquireUpstream(poolAllowed: true)))
  }

  /// A connection for this exchange: `pooled` when taken from the pool.
  /// `responseDeadline`: when the final response head must have come
  /// (`timeouts.upstreamResponse` from now), kept until it does.
  mutating func upstreamReady(
    _ upstream: Upstream, pooled: Bool, tls: UpstreamTLS, protocol name: WireProtocol,
    responseDeadline: Deadline, _ out: inout Actions
  ) {
    guard case .connecting = phase else { return out.append(.upstream(.closeUpstream(upstream))) }
    exchange.upstreamWasPooled = pooled
    exchange.upstreamTLS = tls
    exchange.upstreamProtocol = name
    phase = .exchanging(upstream)
    out.append(.upstream(.sendHead(upstream, exchange: exchange.id)))
    let held = heldBody
    heldBody = []
    for bytes in held { send(bytes, upstream, &out) }
    // A request without a body ended with its head; a framed one ends now.
    if exchange.requestComplete && exchange.hasBody {
      out.append(.upstream(.endBody(upstream, exchange.requestTrailers)))
    }
    self.responseDeadline = responseDeadline
  }

  mutating func requestBody(_ bytes: [UInt8], _ out: inout Actions) {
    switch phase {
    case .waiting, .connecting: heldBody.append(bytes)
    case .exchanging(let upstream): send(bytes, upstream, &out)
    case .done: break
    }
  }

  private mutating func send(_ bytes: [UInt8], _ upstream: Upstream, _ out: inout Actions) {
    exchange.requestBodyBytes += bytes.count
    out.append(.upstream(.sendBody(upstream, bytes)))
  }

  /// The request ended (with these trailers, for a chunked or HTTP/2 body).
  mutating func requestEnd(_ trailers: HTTPHeaders, _ out: inout Actions) {
    guard !exchange.requestComplete else { return }
    exchange.requestComplete = true
    if case .exchanging(let upstream) = phase {
      out.append(.upstream(.endBody(upstream, trailers)))
    } else {
      exchange.requestTrailers = trailers
    }
  }

  // MARK: Response

  /// Response events from `upstream`.
  mutating func upstreamEvents(
    _ events: [HTTP1Parser.BorrowedEvent], from upstream: Upstream, _ out: inout Actions
  ) {
    guard isServed(by: upstream) else { return out.append(.upstream(.closeUpstream(upstream))) }
    // By index, each event read in place: `for event in events` copied
    // every event (a head's copy retains each buffer it holds) to bind it.
    for index in events.indices {
      switch events[index] {
      case .request: break
      case .response(let head):
        // An interim response does not stop the clock: the final head must
        // still come within `upstreamResponse`.
        if (100..<200).contains(head.status) {
          exchange.response = .interim
          out.append(.response(.respondInterim(head)))
          continue
        }
        responseDeadline = nil
        exchange.response = .streaming(
          ResponseStream(status: head.status, upstreamKeepsAlive: head.keepAlive))
        responseHead = head
        out.append(.response(.respondHead(upstream)))
      case .body(let bytes):
        guard case .streaming(var stream) = exchange.response else { continue }
        stream.bodyBytes += bytes.count
        exchange.response = .streaming(stream)
        out.append(.response(.respondBody(bytes, upstream)))
      case .end(let trailers):
        switch exchange.response {
        case .interim:
          // The end of a 1xx is not the end of the exchange.
          exchange.response = .awaitingHead
        case .streaming(let stream):
          out.append(.response(.respondEnd(trailers, upstream)))
          return finish(stream, upstream, &out)
        case .awaitingHead:
          break
        }
      }
    }
  }

  /// The response was relayed to its end: the upstream serves another
  /// exchange (a pooled HTTP/1.1 connection, a freed h2 slot) only when the
  /// request was complete too and the origin keeps the connection alive.
  /// (The response deadline went at the head.)
  private mutating func finish(_ stream: ResponseStream, _ upstream: Upstream, _ out: inout Actions) {
    phase = .done
    if exchange.requestComplete && stream.upstreamKeepsAlive {
      out.append(.upstream(.releaseUpstream(upstream)))
    } else {
      out.append(.upstream(.closeUpstream(upstream)))
    }
    out.append(.upstream(.record))
    out.append(.response(.finished))
  }

  /// `upstream` closed; `failure` says why when it broke a message, and
  /// `mayRetry` whether the request may go again: the connection came from
  /// the pool (an idle close the origin may have raced with our request),
  /// or the origin said it never started the stream (GOAWAY, RFC 9113 §6.8).
  mutating func upstreamClosed(
    _ upstream: Upstream, failure: ProxyFailure?, mayRetry: Bool, _ out: inout Actions
  ) {
    guard isServed(by: upstream) else { return }
    if exchange.responseStarted {
      phase = .done
      return out.append(.response(.cutShort))
    }
    responseDeadline = nil
    // One fresh attempt, when nothing of a request body was sent.
    if mayRetry && !exchange.retried && exchange.requestBodyBytes == 0 {
      exchange.retried = true
      phase = .connecting
      return out.append(.upstream(.acquireUpstream(poolAllowed: false)))
    }
    phase = .connecting
    fail(failure ?? .unreachable("\(exchange.target.key) closed the connection without a response"), &out)
  }

  /// The acquisition failed.
  mutating func dialFailed(_ failure: ProxyFailure, _ out: inout Actions) {
    guard case .connecting = phase else { return }
    fail(failure, &out)
  }

  /// The host's timer fired at `now`: past `responseDeadline`, with no
  /// response head, the exchange is refused 504 naming the wait; before
  /// it (the timer was armed for another deadline), nothing happens.
  mutating func timeout(now: UInt64, _ out: inout Actions) {
    guard let deadline = responseDeadline, deadline.hasPassed(at: now), case .exchanging = phase,
      !exchange.responseStarted
    else { return }
    fail(.timeout("\(exchange.target.key) sent no response within \(deadline.seconds) s"), &out)
  }

  /// Refuses the exchange (its response has not started): an upstream in
  /// use is closed, since mid-exchange its state is unknown.
  mutating func fail(_ failure: ProxyFailure, _ out: inout Actions) {
    if case .exchanging(let upstream) = phase {
      out.append(.upstream(.closeUpstream(upstream)))
    }
    responseDeadline = nil
    phase = .done
    heldBody = []
    out.append(.response(.refuse(failure)))
  }

  /// The client is gone, or could not take the response: an upstream in
  /// use is closed (an HTTP/1.1 connection) or reset (an h2 stream).
  mutating func abandon(_ out: inout Actions) {
    if case .exchanging(let upstream) = phase {
      out.append(.upstream(.closeUpstream(upstream)))
    }
    responseDeadline = nil
    phase = .done
    heldBody = []
  }
}
