import PinConfig
import PinHTTP
import PinTLS

/// The protocol logic of one forward-listener client connection, without
/// I/O: keep-alive, pipelining, the header and idle timers and CONNECT. It
/// takes what happened (client bytes, an upstream ready or closed, response
/// events, a timer) and queues what to do (`Action`), which
/// `ForwardSession` carries out on the loop. Each request is served by an
/// `ExchangeMachine` (the one an HTTP/2 stream uses too), whose answers
/// are framed for HTTP/1.1 by an `HTTP1Downstream`; parsed client events
/// wait in a ring buffer.
///
/// Generic over the upstream handle so that tests drive it with plain
/// objects, no sockets.
struct ForwardMachine<Upstream: SameUpstream> {
  enum State {
    /// Between requests: idle, or part of a head has arrived.
    case awaitingRequest
    /// The request's proxy credential is being hashed (`verifyCredential`);
    /// nothing more is read until `credentialChecked`.
    case authenticating(HTTPRequestHead)
    /// A request head was accepted; `exchange` serves it and owns its upstream.
    case exchanging
    /// A CONNECT is being set up (passthrough dial, interception): nothing is read.
    case openingTunnel(HTTPRequestHead, ForwardTarget?)
    /// Raw bytes both ways; a `Splice` owns both channels now.
    case spliced
    /// The last bytes are being flushed; nothing more is read.
    case closing
  }

  typealias Refusal = PinProxy.Refusal

  /// What the connection asks of its session. The upstream half of the
  /// current exchange's actions passes through unchanged (`upstream`), for
  /// `ExchangeHost` to carry out as an HTTP/2 stream's are; the rest belong
  /// to the connection: reading the client, its head timers, writing the
  /// framed response, CONNECT, refusals and the close.
  enum Action {
    /// Start reading the client, unless `Upstream` is backed up; or stop.
    case resumeClient(unlessBackedUp: Upstream?)
    case pauseClient
    /// The upstream side of the current exchange (acquire, send, timer,
    /// release or close, record): `ExchangeHost.performUpstreamSide`.
    case upstream(UpstreamAction<Upstream>)
    /// Write bytes `range` of the framed response (`clientOutput`) to the
    /// client; stop reading the upstream while the client is backed up. The
    /// bytes stay in the machine's one output buffer until the run that
    /// carried the action out says they went (`clientOutputWritten`).
    case writeClient(Range<Int>, pausing: Upstream?)
    case resumeUpstream(Upstream)
    // Indirect: rare or large payloads stay out of every action's inline size.
    /// Answer with the failure, log it and close after flushing.
    indirect case refuse(Refusal)
    /// Answer with the PAC file of the listener (written for the address
    /// the client reached) and close after flushing.
    indirect case answerPAC(HTTPRequestHead, ListenerConfig)
    /// Dial the passthrough host; answer `passthroughReady` or `dialFailed`.
    case openPassthrough(ForwardTarget)
    /// Mint a leaf and make a TLS engine; answer `interceptionReady` or `interceptionFailed`.
    indirect case intercept(ConnectTarget, InterceptionContext)
    /// Hash a proxy credential off the loop; answer `credentialChecked`.
    indirect case verifyCredential(PendingCredential, ProxyAuthenticator)
    case closeAfterFlush
    case close
  }

  // Internal rather than private: the exchange and CONNECT halves live in extensions.
  var state = State.awaitingRequest
  var parser: HTTP1Parser
  private(set) var limits: HTTPLimits
  var router: ForwardRouter
  /// The client's admission key: proxy authentication's failure buckets are per client.
  private(set) var client: String
  /// The monotonic clock in nanoseconds, read when a request begins (its
  /// duration); injected, so that the machine itself reads no clock.
  let clock: @Sendable () -> UInt64
  /// Parsed but not yet handled (body while connecting, pipelined
  /// requests): the parser appends here directly.
  var pending: RingBuffer<HTTP1Parser.Event>
  var actions: RingBuffer<Action>
  /// The request being served while `state` is `.exchanging`: kept beside
  /// the state, not in it, so that it is changed in place, never copied out
  /// and back.
  var exchange: ExchangeMachine<Upstream>?
  /// The record of the exchange that finished last, until its `.record`
  /// action is carried out (`takeFinishedRecord`): it holds the request's
  /// head, whose storage the next request's head reuses once let go.
  var finishedRecord: ExchangeRecord?
  /// What the current exchange asked, before it becomes `actions`.
  var exchangeActions: ExchangeMachine<Upstream>.Actions
  /// The current response, framed for this client.
  var response: HTTP1Downstream
  /// Set inside an intercepted CONNECT: requests go to this host over TLS.
  var tunnel: ConnectTarget?
  /// What a SOCKS5 client sent after its request (`openTunnel`), until the
  /// tunnel takes it; a CONNECT's client's waits in the parser instead.
  var earlyTunnelBytes: [UInt8] = []
  /// Proxy authentication of this connection (`proxyAuth`): what it has
  /// verified, and the verdict for each request.
  var authGate = ProxyAuthGate()
  /// The proxy credential last verified on this connection (`ProxyAuthGate.credential`).
  var credential: VerifiedCredential? { authGate.credential }
  /// While a request is awaited: when its head must have come, the idle
  /// wait between requests (`timeouts.idleKeepAlive`) or the header wait
  /// before the first or once part of a head is here (`clientHeader`).
  /// Machine state, not a timer: the session arms its one timer for the
  /// earliest deadline after each run (`nextDeadline`) and calls
  /// `timeout(now:)` when it fires.
  private(set) var headDeadline: Deadline?
  /// `headDeadline` is the idle wait (nothing of the next head yet).
  private(set) var headDeadlineIsIdle = false
  /// When the connection last started waiting for a request (the loop's
  /// clock): under overload the longest waiting is evicted first.
  private(set) var awaitingSince: UInt64 = 0
  /// The waits `headDeadline` is set from; the session sets the snapshot's
  /// (and a reload's, for every deadline set after it).
  var timeouts: TimeoutsConfig
  var servedRequests = 0
  var clientFinishedSending = false
  /// The proxy is shutting down: the exchange in flight is the last.
  var draining = false
  private var nextExchange = 0

  /// `storage`: what an ended connection's machine handed back (`Storage`).
  init(
    router: ForwardRouter, limits: HTTPLimits, timeouts: TimeoutsConfig = TimeoutsConfig(),
    client: String = "-",
    clock: @escaping @Sendable () -> UInt64, storage: Storage? = nil
  ) {
    self.router = router
    self.limits = limits
    self.timeouts = timeouts
    self.client = client
    self.clock = clock
    // Waiting since it was made, until it starts waiting for a request (a
    // SOCKS5 tunnel's machine never does before its first head).
    awaitingSince = clock()
    // Made once, from a finished session's storage when there is one (not
    // made empty first and then replaced).
    let storage = storage ?? Storage.queues()
    (pending, actions, exchangeActions) = (storage.pending, storage.actions, storage.exchangeActions)
    response = HTTP1Downstream(clientVersion: .http11, closing: false, output: storage.output)
    parser = HTTP1Parser(role: .request, limits: limits, pausesBetweenMessages: true, spares: storage.parser)
  }

  /// Starts over for the next connection its session serves
  /// (`ForwardSession.serve`): every field as `init` sets it, `router`
  /// replacing the old one unless nil (kept: the same snapshot, listener
  /// and client), while the queues, the response buffer and the parser's
  /// storage stay in place, emptied, as `surrenderStorage` would hand them
  /// on. Field by field, not a new machine assigned: that moved the whole
  /// machine twice and destroyed and rebuilt its storage's wrappers.
  /// `ForwardSessionRecordsTests` checks that the result reads as a new
  /// machine's does, field by field.
  mutating func reopen(router: ForwardRouter?, limits: HTTPLimits, timeouts: TimeoutsConfig, client: String) {
    pending.removeAll()
    actions.removeAll()
    exchangeActions.removeAll()
    response.restart(clientVersion: .http11, closing: false)
    // In place under the same limits (the usual case): a new parser only
    // when a reload changed them.
    if parser.limits == limits {
      parser.restart()
    } else {
      parser = HTTP1Parser(
        role: .request, limits: limits, pausesBetweenMessages: true, spares: parser.takeSpares())
    }
    state = .awaitingRequest
    if let router { self.router = router }
    self.limits = limits
    self.client = client
    exchange = nil
    finishedRecord = nil
    tunnel = nil
    earlyTunnelBytes = []
    authGate = ProxyAuthGate()
    headDeadline = nil
    headDeadlineIsIdle = false
    awaitingSince = clock()
    self.timeouts = timeouts
    servedRequests = 0
    clientFinishedSending = false
    draining = false
    nextExchange = 0
  }

  mutating func nextAction() -> Action? { actions.popFirst() }
  var hasActions: Bool { !actions.isEmpty }

  /// Idle keep-alive: served a request, nothing of the next one yet.
  var isIdleBetweenRequests: Bool {
    guard case .awaitingRequest = state else { return false }
    return servedRequests > 0 && parser.isIdle && pending.isEmpty
  }

  var isAwaitingRequest: Bool { if case .awaitingRequest = state { true } else { false } }
  var isExchanging: Bool { if case .exchanging = state { true } else { false } }

  // MARK: Client events

  mutating func start() { awaitRequest() }

  mutating func clientRead(_ bytes: UnsafeRawBufferPointer) {
    switch state {
    case .closing, .spliced: return
    default: break
    }
    do {
      try parse { (parser, events) throws(HTTPParseError) in try parser.feed(bytes, into: &events) }
    } catch {
      return refuseMalformed(error)
    }
    process()
    // Part of a head waits: the header wait replaces the idle one. After
    // `process`, so that a whole head (the usual keep-alive read) sets no
    // deadline it would clear in the same turn.
    if case .awaitingRequest = state, headDeadlineIsIdle, !parser.isIdle || !pending.isEmpty {
      awaitRestOfHead()
    }
  }

  /// One parser call, its events appended to `pending` as they are parsed
  /// (bodies copied: a body may wait for its upstream). After an error
  /// nothing of the call is queued: a malformed read is not handled.
  private mutating func parse(
    _ call: (inout HTTP1Parser, inout RingBuffer<HTTP1Parser.Event>) throws(HTTPParseError) -> Void
  ) throws(HTTPParseError) {
    let queued = pending.count
    do {
      try call(&parser, &pending)
    } catch {
      pending.removeLast(pending.count - queued)
      throw error
    }
  }

  mutating func clientEOF() {
    clientFinishedSending = true
    do {
      try parse { (parser, events) throws(HTTPParseError) in try parser.finish(into: &events) }
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
    if case .exchanging = state, let upstream = inExchange({ $0.upstream }) ?? nil {
      actions.append(.resumeUpstream(upstream))
    }
  }

  mutating func clientClosed() {
    abandonExchange()
    state = .closing
  }

  /// The earliest deadline the machine keeps: the head's, or the current
  /// exchange's response deadline (never both at once).
  var nextDeadline: Deadline? {
    mutating get {
      guard let head = headDeadline else { return responseDeadline }
      guard let response = responseDeadline else { return head }
      return response.at < head.at ? response : head
    }
  }

  /// The session's timer fired at `now`: whichever deadline has passed is
  /// answered (an idle connection closes, part of a head is a 408, an
  /// exchange without its response head a 504); one not yet passed stays.
  mutating func timeout(now: UInt64) {
    if let deadline = headDeadline, deadline.hasPassed(at: now) {
      headDeadline = nil
      headDeadlinePassed(after: deadline.seconds)
    }
    responseDeadlineReached(now: now)
  }

  /// The idle or header wait of `seconds` is over.
  private mutating func headDeadlinePassed(after seconds: Double) {
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
    abandonExchange()
    state = .closing
    clearHeadDeadline()
    actions.append(.close)
  }

  // MARK: Handling parsed events

  /// Handles queued events as far as the state allows.
  mutating func process() {
    // Each event is moved out of the queue, and moved back when it must
    // wait: never copied (a head's copy retains every buffer it holds).
    // What to do with it is decided from its case alone, before its payload
    // is bound: a pattern with a binding and a failing `where` copied the
    // payload to bind it, then destroyed both.
    while let event = pending.popFirst() {
      let step = step(for: event)
      guard step != .wait else {
        // Wait: the upstream is not ready, or a pipelined request waits its turn.
        pending.prepend(event)
        return actions.append(.pauseClient)
      }
      // Consumed by the switch: a head is moved on into its exchange.
      switch consume event {
      case .request(let head):
        begin(head)
      case .body(let bytes):
        exchange!.requestBody(bytes, &exchangeActions)
        runExchangeActions()
      case .end(let trailers):
        // A request without a body is complete at its head: no need to stop
        // reading (a pause and resume per request cost two epoll_ctl calls).
        exchange!.requestEnd(step == .endAtHead ? HTTPHeaders() : trailers, &exchangeActions)
        runExchangeActions()
      case .response:
        // Never: a request parser gives none, and `step` keeps one waiting.
        break
      }
    }
    switch state {
    case .closing, .spliced, .openingTunnel, .authenticating: return
    default: break
    }
    // The next request waits unparsed until this exchange is done: stop
    // reading rather than buffer what a pipelining client sends ahead. After
    // a CONNECT head, bytes wait for the tunnel the same way.
    if (parser.isPaused && parser.hasBufferedInput) || parser.isUpgraded {
      return actions.append(.pauseClient)
    }
    if case .exchanging = state {
      actions.append(.resumeClient(unlessBackedUp: inExchange { $0.upstream } ?? nil))
    } else {
      actions.append(.resumeClient(unlessBackedUp: nil))
    }
  }

  /// What `process` does with a queued client event.
  private enum Step {
    case begin, body, end
    /// The end of a request without a body, complete at its head.
    case endAtHead
    /// Not now: back to the queue, the client paused.
    case wait
  }

  /// Reads only the event's case: nothing of its payload is copied.
  private mutating func step(for event: borrowing HTTP1Parser.Event) -> Step {
    switch event {
    case .request:
      return isAwaitingRequest ? .begin : .wait
    case .body:
      return isExchanging && inExchange({ $0.hasUpstream }) == true ? .body : .wait
    case .end:
      guard isExchanging else { return .wait }
      if inExchange({ $0.hasUpstream && !$0.exchange.requestComplete }) == true { return .end }
      if inExchange({ $0.isConnecting && !$0.exchange.hasBody && !$0.exchange.requestComplete }) == true {
        return .endAtHead
      }
      return .wait
    case .response:
      return .wait
    }
  }

  private mutating func begin(_ head: consuming HTTPRequestHead) {
    clearHeadDeadline()
    if let refusal = router.refusal { return fail(refusal, request: head) }
    // PAC fetchers (browsers, OS settings) send no proxy credentials: the
    // file is served to every client the listener admits, before proxyAuth.
    if tunnel == nil, PACFile.isRequest(head), let listener = router.pacListener {
      return answerPAC(head, listener: listener)
    }
    if let authenticator = router.authenticator {
      guard authorize(head, authenticator) else { return }
    }
    dispatch(head)
  }

  /// `GET /proxy.pac` (or `/wpad.dat`): the file written from the policy
  /// in force, then the connection closes.
  private mutating func answerPAC(_ head: HTTPRequestHead, listener: ListenerConfig) {
    actions.append(.answerPAC(head, listener))
    state = .closing
  }

  mutating func dispatch(_ head: consuming HTTPRequestHead) {
    let decision = router.route(head, inside: tunnel)
    follow(decision, for: head)
  }

  /// Carries out the router's decision for `head`: a refusal, an exchange,
  /// or a tunnel being opened.
  mutating func follow(_ decision: RoutingDecision, for head: consuming HTTPRequestHead) {
    switch decision {
    case .refuse(let failure):
      fail(failure, request: head)
    case .forward(let target):
      nextExchange += 1
      response.reset(clientVersion: head.version, closing: !head.keepAlive || clientFinishedSending)
      state = .exchanging
      exchange = ExchangeMachine(
        Exchange(
          id: nextExchange, request: consume head, target: target, clientProtocol: .http1, started: clock()))
      exchange!.start(&exchangeActions)
      runExchangeActions()
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

  /// The exchange is over: parse what has arrived of the next request and
  /// handle it; a connection still waiting gets the timer that fits.
  mutating func parseNextRequest() {
    state = .awaitingRequest
    do {
      try parse { (parser, events) throws(HTTPParseError) in try parser.resume(into: &events) }
    } catch {
      // The client half-closed after part of a pipelined request: nothing can complete it.
      if error.kind == .truncated { return closeNow() }
      return refuseMalformed(error)
    }
    process()
    if case .awaitingRequest = state { awaitRequest() }
  }

  /// Sets the deadline of a connection waiting for a request: the idle
  /// one between requests, the header one before the first or once part
  /// of a head is here.
  mutating func awaitRequest() {
    state = .awaitingRequest
    headDeadlineIsIdle = servedRequests > 0 && parser.isIdle && pending.isEmpty
    awaitingSince = clock()
    headDeadline = Deadline(
      seconds: headDeadlineIsIdle ? timeouts.idleKeepAlive : timeouts.clientHeader, from: awaitingSince)
  }

  /// Part of a head is here: the header wait replaces the idle one.
  mutating func awaitRestOfHead() {
    headDeadlineIsIdle = false
    headDeadline = Deadline(seconds: timeouts.clientHeader, from: clock())
  }

  mutating func clearHeadDeadline() {
    headDeadline = nil
  }

  // MARK: Endings

  private mutating func refuseMalformed(_ error: HTTPParseError) {
    if case .exchanging = state, let current = exchange, current.hasUpstream,
      !current.exchange.requestComplete
    {
      // A body that breaks framing mid-stream: the upstream must not get the rest.
      if current.exchange.responseStarted { return closeNow() }
      abandonExchange()
    }
    fail(ProxyFailure(status: error.status, code: .badRequest, reason: error.reason))
  }

  /// Answers with the failure, logs it, and closes after flushing.
  mutating func fail(_ failure: ProxyFailure, request: HTTPRequestHead? = nil, target: ForwardTarget? = nil) {
    var refusal = Refusal(failure, request: request, target: target, tunnel: tunnel)
    refusal.started = inExchange { $0.exchange.started } ?? clock()
    abandonExchange()
    clearHeadDeadline()
    actions.append(.refuse(refusal))
    state = .closing
  }

  /// Closes the upstream of an exchange in progress: mid-exchange its state
  /// is unknown, so it is never pooled. Every path that leaves such a state
  /// calls this before changing `state`.
  private mutating func abandonExchange() {
    guard case .exchanging = state, exchange != nil else { return }
    exchange!.abandon(&exchangeActions)
    exchange = nil
    // Only upstream actions come of it: no response to frame.
    while let action = exchangeActions.popFirst() {
      if case .upstream(let upstreamSide) = consume action { actions.append(.upstream(upstreamSide)) }
    }
  }
}
