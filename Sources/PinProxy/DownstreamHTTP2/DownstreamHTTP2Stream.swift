import Dispatch
import Foundation
import PinEventLoop
import PinHTTP
import PinHTTP2

/// What a stream needs of its connection, and nothing more: the codec its
/// response is framed on and its window acknowledged through, the loop its
/// timer runs on, and the connection-wide decisions (upstream slots and
/// buffered bytes, the refusal's log line, the flush). A test stands in for
/// the connection with a real codec and no socket.
protocol HTTP2StreamHost: AnyObject {
  var loop: EventLoop { get }
  /// nghttp2 for this connection: the response is framed and the stream reset on it.
  var codec: HTTP2Session { get }
  /// Request DATA of `stream` was taken: its flow-control window reopens.
  func acknowledge(_ stream: Int32, _ count: Int)
  /// `timeouts.upstreamResponse` of the snapshot in force.
  var responseTimeout: Double { get }
  /// Hands a cleanly finished upstream back (`UpstreamLink.release`).
  func release(_ link: any UpstreamLink)
  /// The stream is still this connection's (not closed, not replaced).
  func holds(_ stream: DownstreamHTTP2Stream) -> Bool
  /// Takes an upstream for the stream's exchange; the answer goes to its machine.
  func acquire(for stream: DownstreamHTTP2Stream, poolAllowed: Bool)
  /// Whether the stream's upstream must stay paused (its buffered response).
  func pausesUpstream(of stream: DownstreamHTTP2Stream) -> Bool
  /// The stream's upstream was paused, or read again: the connection
  /// resumes paused ones as its buffers drain.
  func upstreamPaused(_ paused: Bool)
  /// The stream started or stopped acquiring or holding an upstream
  /// (`maxUpstreamExchanges` counts these).
  func upstreamSlot(taken: Bool)
  func report(_ record: ExchangeRecord)
  /// Answers `failure` on the stream (logged, counted, framed as a response).
  func refuse(_ stream: DownstreamHTTP2Stream, _ failure: ProxyFailure)
  /// Writes what the codec has queued.
  func flush()
}

/// One stream of an HTTP/2 client (an intercepted CONNECT whose client chose
/// `h2`): one exchange, decided by the same `ExchangeMachine` an HTTP/1.1
/// request uses and answered through `HTTP2Downstream`. It carries out the
/// machine's actions (the upstream side through `ExchangeHost`, the one
/// executor both client protocols use) and is the delegate of the upstream
/// link it gets; its connection (`HTTP2StreamHost`, the
/// `DownstreamHTTP2Session`) owns the streams, the window and the socket.
///
/// Confined to the host's loop: every entry point is a host call, an
/// upstream delegate call, an acquisition completion or a timer on it.
final class DownstreamHTTP2Stream: ExchangeHost, @unchecked Sendable {
  /// Why a routed stream is not acquiring its upstream yet.
  enum Hold {
    case none
    /// Its small, declared body is held until complete (`heldBodyLimit`).
    case body
    /// It waits for one of its connection's upstream slots (`maxUpstreamExchanges`).
    case queue
  }

  let id: Int32
  unowned let host: any HTTP2StreamHost
  private(set) var machine: ExchangeMachine<UpstreamRef>
  private var downstream: HTTP2Downstream
  private var actions = ExchangeMachine<UpstreamRef>.Actions(capacity: 8)
  /// The upstream links the machine's exchange holds, by handle.
  private var upstreams = UpstreamLinks()
  private var running = false
  var hold = Hold.none
  /// Trailers that arrived before the stream's end.
  var requestTrailers = HTTPHeaders()
  /// DATA forwarded while the upstream was backed up: consumed (the window
  /// reopened) when it drains.
  private var unconsumed = 0
  /// The upstream is paused because the client side of this stream is backed up.
  private(set) var upstreamPaused = false
  /// What the host's count of upstream slots in use has of this stream.
  private var countedSlot = false
  /// Before the origin, the body or the turn must come by `holdDeadline`;
  /// after it, the response head by the machine's `responseDeadline`. One
  /// one-shot timer follows whichever applies (`followDeadline`).
  private var timer: LoopTimer?
  /// `upstreamResponse` from the stream's start (the connection's `armTimer`).
  private var holdDeadline: Deadline?
  /// When `timer` fires (uptime ns); nil when none is armed.
  private var timerAt: UInt64?

  init(id: Int32, exchange: Exchange, host: any HTTP2StreamHost) {
    self.id = id
    self.host = host
    machine = ExchangeMachine(exchange)
    downstream = HTTP2Downstream(session: host.codec, stream: id)
  }

  var target: ForwardTarget { machine.exchange.target }

  /// Hands one event to the machine and carries out what it asks, in order.
  /// An action that answers at once (a pooled upstream) feeds the machine
  /// again; its actions join the same queue.
  func run(_ event: (inout ExchangeMachine<UpstreamRef>, inout ExchangeMachine<UpstreamRef>.Actions) -> Void)
  {
    host.loop.preconditionInLoop()
    event(&machine, &actions)
    // Counted as the machine changes, not after the run: a flush inside
    // this run (an acquisition answered at once) starts queued streams by
    // this count.
    countSlot()
    guard !running else { return }
    running = true
    defer { running = false }
    while let action = actions.popFirst() {
      switch action {
      case .upstream(let upstreamSide): performUpstreamSide(upstreamSide)
      case .response(let responseSide): respond(responseSide)
      }
    }
    followDeadline()
  }

  /// The deadline the stream waits for now: the exchange's response
  /// deadline once its request is upstream, the hold's while it waits for
  /// its body or a slot; none while it connects (the dial's own timeouts
  /// bound that) or once answered.
  private var currentDeadline: Deadline? {
    if let response = machine.responseDeadline { return response }
    if case .waiting = machine.phase { return holdDeadline }
    return nil
  }

  /// After each run: the timer follows the current deadline. One armed for
  /// the same moment or sooner stays (its firing re-checks and re-arms for
  /// what is left), so the hold's deadline giving way to the response's, a
  /// moment later, costs no second timer.
  private func followDeadline() {
    guard let deadline = currentDeadline else { return stopTimer() }
    if let armed = timerAt, armed <= deadline.at { return }
    timer?.cancel()
    timerAt = deadline.at
    timer = host.loop.schedule(at: deadline.at) { [weak self] in self?.timerFired() }
  }

  private func stopTimer() {
    guard timerAt != nil else { return }
    timer?.cancel()
    (timer, timerAt) = (nil, nil)
  }

  private func countSlot() {
    let uses = machine.usesUpstream
    guard uses != countedSlot else { return }
    countedSlot = uses
    host.upstreamSlot(taken: uses)
  }

  // MARK: From the connection

  /// Starts the clock for the whole exchange: answered within `upstreamResponse`.
  func armTimer() {
    holdDeadline = Deadline(seconds: host.responseTimeout, from: host.loop.now)
    followDeadline()
  }

  /// Whichever deadline has passed is answered; one not yet passed (the
  /// timer was armed for an earlier one) is armed again for what is left.
  private func timerFired() {
    (timer, timerAt) = (nil, nil)
    guard host.holds(self) else { return }
    let now = host.loop.now
    if let response = machine.responseDeadline {
      guard response.hasPassed(at: now) else { return followDeadline() }
      run { $0.timeout(now: now, &$1) }
      return host.flush()
    }
    guard case .waiting = machine.phase, let deadline = holdDeadline else { return }
    guard deadline.hasPassed(at: now) else { return followDeadline() }
    holdDeadline = nil
    let seconds = deadline.seconds
    switch hold {
    case .body:
      run {
        $0.fail(
          ProxyFailure(
            status: 408, code: .badRequest, reason: "request body not received within \(seconds) s"),
          &$1)
      }
    case .queue:
      hold = .none
      run {
        $0.fail(
          ProxyFailure(
            status: 503, code: .overCapacity,
            reason: "no upstream slot of this connection came free within \(seconds) s"), &$1)
      }
    case .none:
      return
    }
    host.flush()
  }

  func requestBody(_ bytes: [UInt8]) {
    if machine.isDone {
      // Answered already: its DATA is dropped, its window kept open.
      return host.acknowledge(id, bytes.count)
    }
    run { $0.requestBody(bytes, &$1) }
  }

  func requestEnd(_ trailers: HTTPHeaders) { run { $0.requestEnd(trailers, &$1) } }

  /// The client is gone from this stream: an unfinished exchange's upstream
  /// is closed (an HTTP/1.1 connection) or reset (an h2 stream).
  func abandon() {
    stopTimer()
    run { $0.abandon(&$1) }
    // The machine closed its upstream; one still held would serve no one.
    for link in upstreams.letGoAll() { link.close() }
    if upstreamPaused { setUpstreamPaused(false) }
  }

  /// Reads the upstream again once the connection's buffers allow it.
  func resumeUpstreamIfAllowed() {
    guard upstreamPaused, !host.pausesUpstream(of: self) else { return }
    setUpstreamPaused(false)
    machine.upstream.flatMap { upstreams[$0] }?.resumeReading()
  }

  private func setUpstreamPaused(_ paused: Bool) {
    upstreamPaused = paused
    host.upstreamPaused(paused)
  }

  // MARK: UpstreamDelegate

  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent]) {
    // Body bytes are lent for this call only: the actions they become must
    // run now, not wait in the queue of a run already under way (upstream
    // events come from reads, which never happen inside a run).
    precondition(!running, "upstream events during a stream's run")
    // A link this stream does not hold has nothing to say to it: closed,
    // as the machine closes an upstream that does not serve it.
    guard let handle = upstreams.handle(of: upstream) else { return upstream.close() }
    run { $0.upstreamEvents(events, from: handle, &$1) }
    host.flush()
  }

  func upstreamDidDrain(_ upstream: any UpstreamLink) {
    guard let handle = upstreams.handle(of: upstream), machine.isServed(by: handle), unconsumed > 0 else {
      return
    }
    host.acknowledge(id, unconsumed)
    unconsumed = 0
    host.flush()
  }

  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    // Let go of before the machine hears of it.
    guard let handle = upstreams.letGo(closed: upstream) else { return }
    let mayRetry = upstream.mayRetryAfterClose
    run { $0.upstreamClosed(handle, failure: failure, mayRetry: mayRetry, &$1) }
    host.flush()
  }

  // MARK: ExchangeHost

  func acquireUpstream(poolAllowed: Bool) { host.acquire(for: self, poolAllowed: poolAllowed) }

  /// Flow control is the back-pressure: what the upstream has not taken is
  /// not acknowledged, so the client's window for this stream closes.
  func requestBodySent(_ count: Int, backedUp: Bool) {
    if backedUp {
      unconsumed += count
    } else {
      host.acknowledge(id, count)
    }
  }

  func releaseUpstream(_ link: any UpstreamLink) { host.release(link) }
  func link(_ upstream: UpstreamRef) -> (any UpstreamLink)? { upstreams[upstream] }
  func letGo(_ upstream: UpstreamRef) -> (any UpstreamLink)? { upstreams.letGo(upstream) }

  /// Holds `link`, just acquired for this stream's exchange, and returns
  /// the handle its machine is given.
  func holdUpstream(_ link: any UpstreamLink) -> UpstreamRef { upstreams.hold(link) }
  func forwardedRequest(exchange id: Int) -> ForwardedRequest? {
    machine.exchange.id == id ? machine.forwardedRequest : nil
  }
  func reportFinishedExchange() {
    if let record = machine.record { host.report(record) }
  }

  // MARK: The response side

  private func respond(_ action: ResponseAction<UpstreamRef>) {
    switch action {
    case .respondInterim(let head):
      downstream.sendInterim(head)
    case .respondHead(let upstream):
      guard let head = machine.takeResponseHead() else { break }
      if !downstream.sendHead(head, upstreamProtocol: machine.exchange.upstreamProtocol) {
        responseCannotStart(upstream)
      }
    case .respondBody(let bytes, let upstream):
      downstream.sendBody(bytes)
      // Back-pressure: a stream whose client does not keep up stops its upstream.
      if !upstreamPaused && host.pausesUpstream(of: self) {
        setUpstreamPaused(true)
        upstreams[upstream]?.pauseReading()
      }
    case .respondEnd(let trailers, _):
      downstream.end(trailers: trailers)
    case .refuse(let failure):
      host.refuse(self, failure)
    case .cutShort:
      // Part of the response went out: only a reset tells the client it is cut short.
      try? host.codec.submitReset(stream: id, errorCode: HTTP2ErrorCode.internalError)
    case .finished:
      break
    }
  }

  /// The response could not be started on the client stream (nghttp2 no
  /// longer takes it): both ends go, and nothing more of this exchange runs.
  private func responseCannotStart(_ upstream: UpstreamRef) {
    actions.removeAll()
    var ignored = ExchangeMachine<UpstreamRef>.Actions(capacity: 1)
    machine.abandon(&ignored)
    countSlot()
    stopTimer()
    upstreams.letGo(upstream)?.close()
    try? host.codec.submitReset(stream: id, errorCode: HTTP2ErrorCode.internalError)
  }
}
