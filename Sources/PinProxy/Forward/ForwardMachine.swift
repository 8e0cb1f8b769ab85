import PinHTTP
import PinTLS

/// How the machine tells upstream handles apart (the session's are links
/// compared by identity; tests use plain objects).
protocol SameUpstream {
  func isSame(as other: Self) -> Bool
}

/// The protocol logic of one forward-listener client connection, without
/// I/O: it takes what happened (client bytes, an upstream ready or closed,
/// response events, a timer) and queues what to do (`Action`), which
/// `ForwardSession` carries out on the loop. Per-exchange data lives in the
/// state's associated values; parsed client events wait in a ring buffer.
///
/// Generic over the upstream handle so that tests drive it with plain
/// objects, no sockets.
struct ForwardMachine<Upstream: SameUpstream> {
  enum State {
    /// Between requests: idle, or part of a head has arrived.
    case awaitingRequest
    /// A request head was accepted; its upstream connection is being opened.
    case connecting(Exchange)
    /// Request and response are flowing over `Upstream`.
    case exchanging(Exchange, Upstream)
    /// A CONNECT is being set up (passthrough dial, interception): nothing is read.
    case openingTunnel(HTTPRequestHead, ForwardTarget?)
    /// Raw bytes both ways; a `Splice` owns both channels now.
    case spliced
    /// The last bytes are being flushed; nothing more is read.
    case closing
  }

  enum Action {
    /// Start reading the client, unless `Upstream` is backed up; or stop.
    case resumeClient(unlessBackedUp: Upstream?)
    case pauseClient
    /// The session starts waiting for a request: arm the idle (or header) timer.
    case awaitRequest(idle: Bool)
    /// Part of a head arrived: the header timer replaces the idle one.
    case armHeaderTimer
    case cancelHeadTimer
    /// Take a pooled connection or dial one; answer `upstreamReady` or `dialFailed`.
    case acquireUpstream(exchange: Int, ForwardTarget, poolAllowed: Bool)
    /// Make the session the upstream's delegate.
    case adoptUpstream(Upstream)
    /// Send the request head (the link frames it for its protocol).
    indirect case sendHead(Upstream, ForwardedRequest)
    /// Send body bytes; stop reading the client while the upstream is backed up.
    case sendBody(Upstream, [UInt8])
    /// The request body ended, with these trailers (chunked or HTTP/2 only).
    case endBody(Upstream, HTTPHeaders)
    /// Write to the client; stop reading the upstream while the client is backed up.
    case writeClient([UInt8], pausing: Upstream?)
    case resumeUpstream(Upstream)
    case armResponseTimer(exchange: Int)
    case cancelResponseTimer
    /// The exchange is done: keep the link's connection for reuse (if clean).
    case releaseUpstream(Upstream)
    case closeUpstream(Upstream)
    // Indirect: rare or large payloads stay out of every action's inline size.
    indirect case record(ExchangeRecord)
    /// Answer with the failure, log it and close after flushing.
    indirect case refuse(Refusal)
    /// Dial the passthrough host; answer `passthroughReady` or `dialFailed`.
    case openPassthrough(ForwardTarget)
    /// Mint a leaf and make a TLS engine; answer `interceptionReady` or `interceptionFailed`.
    indirect case intercept(ConnectTarget, InterceptionContext)
    case closeAfterFlush
    case close
  }

  /// A refusal and what the log says about it.
  struct Refusal {
    let failure: ProxyFailure
    let method: String
    let target: String
    let rule: String
    /// The request's `Accept` lists `text/html`: a person is reading.
    let wantsHTML: Bool
    /// `host:port` the request was for, as far as it is known (for the page).
    let site: String
  }

  // Internal rather than private: the upstream half lives in ForwardMachine+Upstream.swift.
  var state = State.awaitingRequest
  var parser: HTTP1Parser
  let limits: HTTPLimits
  var router: ForwardRouter
  /// Parsed but not yet handled (body while connecting, pipelined requests).
  var pending = RingBuffer<HTTP1Parser.Event>()
  var actions = RingBuffer<Action>(capacity: 16)
  /// Set inside an intercepted CONNECT: requests go to this host over TLS.
  var tunnel: ConnectTarget?
  private var headTimerIsIdle = false
  var servedRequests = 0
  var clientFinishedSending = false
  private var nextExchange = 0

  init(router: ForwardRouter, limits: HTTPLimits) {
    self.router = router
    self.limits = limits
    parser = HTTP1Parser(role: .request, limits: limits, pausesBetweenMessages: true)
  }

  mutating func nextAction() -> Action? { actions.popFirst() }

  /// Idle keep-alive: served a request, nothing of the next one yet.
  var isIdleBetweenRequests: Bool {
    guard case .awaitingRequest = state else { return false }
    return servedRequests > 0 && parser.isIdle && pending.isEmpty
  }

  var isAwaitingRequest: Bool { if case .awaitingRequest = state { true } else { false } }

  // MARK: Client events

  mutating func start() { awaitRequest() }

  mutating func clientRead(_ bytes: UnsafeRawBufferPointer) {
    switch state {
    case .closing, .spliced: return
    default: break
    }
    do {
      pending.append(contentsOf: try parser.feed(bytes))
    } catch {
      return refuseMalformed(error)
    }
    if case .awaitingRequest = state, headTimerIsIdle, !parser.isIdle || !pending.isEmpty { armHeaderTimer() }
    process()
  }

  mutating func clientEOF() {
    clientFinishedSending = true
    do {
      pending.append(contentsOf: try parser.finish())
    } catch {
      // The client stopped in the middle of a request: nothing can complete it.
      return closeNow()
    }
    switch state {
    case .awaitingRequest where pending.isEmpty: closeNow()
    case .closing, .spliced: break
    default: process()
    }
  }

  mutating func clientDrained() {
    if case .exchanging(_, let upstream) = state { actions.append(.resumeUpstream(upstream)) }
  }

  mutating func clientClosed() {
    releaseUpstream()
    state = .closing
  }

  /// The idle or header timer fired after `seconds`.
  mutating func headTimerFired(after seconds: Double) {
    guard case .awaitingRequest = state else { return }
    if parser.isIdle && pending.isEmpty { return closeNow() }
    fail(
      ProxyFailure(status: 408, code: .badRequest, reason: "request head not received within \(seconds) s"))
  }

  /// Graceful shutdown: an idle connection closes now; one with an exchange
  /// in flight finishes it and then closes.
  mutating func drain() {
    if case .awaitingRequest = state, parser.isIdle, pending.isEmpty { closeNow() }
  }

  /// Closes now: overload eviction, a splice's idle limit, a failed tunnel.
  mutating func closeNow() {
    releaseUpstream()
    state = .closing
    actions.append(.cancelHeadTimer)
    actions.append(.close)
  }

  // MARK: Handling parsed events

  /// Handles queued events as far as the state allows.
  mutating func process() {
    while let event = pending.first {
      switch (state, event) {
      case (.awaitingRequest, .request(let head)):
        _ = pending.popFirst()
        begin(head)
      case (.exchanging(var exchange, let upstream), .body(let bytes)) where !exchange.requestComplete:
        _ = pending.popFirst()
        exchange.requestBodyBytes += bytes.count
        state = .exchanging(exchange, upstream)
        actions.append(.sendBody(upstream, bytes))
      case (.exchanging(var exchange, let upstream), .end(let trailers)) where !exchange.requestComplete:
        _ = pending.popFirst()
        actions.append(.endBody(upstream, trailers))
        exchange.requestComplete = true
        state = .exchanging(exchange, upstream)
      case (.connecting(var exchange), .end) where !exchange.hasBody && !exchange.requestComplete:
        // A request without a body is complete at its head: no need to stop
        // reading (a pause and resume per request cost two epoll_ctl calls).
        _ = pending.popFirst()
        exchange.requestComplete = true
        state = .connecting(exchange)
      default:
        // Wait: the upstream is not ready, or a pipelined request waits its turn.
        return actions.append(.pauseClient)
      }
    }
    switch state {
    case .closing, .spliced, .openingTunnel: return
    default: break
    }
    // The next request waits unparsed until this exchange is done: stop
    // reading rather than buffer what a pipelining client sends ahead. After
    // a CONNECT head, bytes wait for the tunnel the same way.
    if (parser.isPaused && parser.hasBufferedInput) || parser.isUpgraded {
      return actions.append(.pauseClient)
    }
    if case .exchanging(_, let upstream) = state {
      actions.append(.resumeClient(unlessBackedUp: upstream))
    } else {
      actions.append(.resumeClient(unlessBackedUp: nil))
    }
  }

  private mutating func begin(_ head: HTTPRequestHead) {
    actions.append(.cancelHeadTimer)
    switch router.route(head, inside: tunnel) {
    case .refuse(let failure):
      fail(failure, request: head)
    case .forward(let target):
      nextExchange += 1
      let exchange = Exchange(
        id: nextExchange, request: head, target: target,
        closeAfterResponse: !head.keepAlive || clientFinishedSending)
      state = .connecting(exchange)
      actions.append(.acquireUpstream(exchange: exchange.id, target, poolAllowed: true))
    case .passthrough(let target):
      // Bytes after the CONNECT head wait in the parser for the tunnel.
      state = .openingTunnel(head, target)
      actions.append(.pauseClient)
      actions.append(.openPassthrough(target))
    case .intercept(let target, let interception):
      state = .openingTunnel(head, nil)
      actions.append(.pauseClient)
      actions.append(.intercept(target, interception))
    }
  }

  /// The exchange is over: parse what has arrived of the next request.
  mutating func parseNextRequest() {
    do {
      pending.append(contentsOf: try parser.resume())
    } catch {
      // The client half-closed after part of a pipelined request: nothing can complete it.
      if error.kind == .truncated { return closeNow() }
      return refuseMalformed(error)
    }
    // Part of the next head is already here: it gets the header timer, not the idle one.
    if case .awaitingRequest = state, !parser.isIdle || !pending.isEmpty { armHeaderTimer() }
    process()
  }

  mutating func awaitRequest() {
    state = .awaitingRequest
    headTimerIsIdle = servedRequests > 0
    actions.append(.awaitRequest(idle: headTimerIsIdle))
  }

  mutating func armHeaderTimer() {
    headTimerIsIdle = false
    actions.append(.armHeaderTimer)
  }

  // MARK: Endings

  private mutating func refuseMalformed(_ error: HTTPParseError) {
    if case .exchanging(let exchange, let upstream) = state, !exchange.requestComplete {
      // A body that breaks framing mid-stream: the upstream must not get the rest.
      actions.append(.cancelResponseTimer)
      actions.append(.closeUpstream(upstream))
      state = .connecting(exchange)
      if exchange.responseStarted { return closeNow() }
    }
    fail(ProxyFailure(status: error.status, code: .badRequest, reason: error.reason))
  }

  /// Answers with the failure, logs it, and closes after flushing.
  mutating func fail(_ failure: ProxyFailure, request: HTTPRequestHead? = nil, target: ForwardTarget? = nil) {
    releaseUpstream()
    let described =
      target.map { $0.key.description } ?? request.map { String($0.rawTarget.prefix(200)) } ?? "-"
    actions.append(.cancelHeadTimer)
    actions.append(
      .refuse(
        Refusal(
          failure: failure, method: request?.method ?? "-", target: described,
          rule: target?.route.ruleName ?? "-", wantsHTML: RefusalPage.wanted(by: request),
          site: site(of: request, target: target)))
    )
    state = .closing
  }

  /// The upstream a refused request was for: the routed target, else the
  /// tunnel's host, else what the request line names.
  private func site(of request: HTTPRequestHead?, target: ForwardTarget?) -> String {
    if let target { return target.key.description }
    if let tunnel { return "\(tunnel.host):\(tunnel.port)" }
    switch request?.target {
    case .absolute(_, let host, let port, _)?: return port.map { "\(host):\($0)" } ?? host
    case .authority(let host, let port)?: return "\(host):\(port)"
    default: return "-"
    }
  }

  /// Closes the upstream connection of an exchange in progress: mid-exchange
  /// its state is unknown, so it is never pooled. Every path that leaves
  /// such a state calls this before changing `state`.
  private mutating func releaseUpstream() {
    if case .exchanging(_, let upstream) = state {
      actions.append(.cancelResponseTimer)
      actions.append(.closeUpstream(upstream))
    }
  }
}
