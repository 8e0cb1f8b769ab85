import Dispatch
import Foundation
import PinEventLoop
import PinHTTP
import PinHTTP2

/// One stream of an HTTP/2 client (an intercepted CONNECT whose client chose
/// `h2`): one exchange, decided by the same `ExchangeMachine` an HTTP/1.1
/// request uses and answered through `HTTP2Downstream`. It carries out the
/// machine's actions and is the delegate of the upstream link it gets; the
/// session (`DownstreamHTTP2Session`) owns the streams, the window and the
/// connection.
///
/// Confined to the session's loop: every entry point is a session call, an
/// upstream delegate call, an acquisition completion or a timer on it.
final class DownstreamHTTP2Stream: UpstreamDelegate, @unchecked Sendable {
  /// Why a routed stream is not acquiring its upstream yet.
  enum Hold {
    case none
    /// Its small, declared body is held until complete (`heldBodyLimit`).
    case body
    /// It waits for one of its connection's upstream slots (`maxUpstreamExchanges`).
    case queue
  }

  let id: Int32
  unowned let session: DownstreamHTTP2Session
  private(set) var machine: ExchangeMachine<UpstreamRef>
  private var downstream: HTTP2Downstream
  private var actions = ExchangeMachine<UpstreamRef>.Actions(capacity: 8)
  private var running = false
  var hold = Hold.none
  /// Trailers that arrived before the stream's end.
  var requestTrailers = HTTPHeaders()
  /// DATA forwarded while the upstream was backed up: consumed (the window
  /// reopened) when it drains.
  private var unconsumed = 0
  /// The upstream is paused because the client side of this stream is backed up.
  var upstreamPaused = false
  /// Before the origin: the body or the turn must come within
  /// `upstreamResponse`; after it, the response head.
  private var timer: LoopTimer?

  init(id: Int32, exchange: Exchange, session: DownstreamHTTP2Session) {
    self.id = id
    self.session = session
    machine = ExchangeMachine(exchange)
    downstream = HTTP2Downstream(session: session.session, stream: id)
  }

  var target: ForwardTarget { machine.exchange.target }

  /// Holds an upstream, or is acquiring one.
  var usesUpstreamSlot: Bool { machine.usesUpstream }

  /// Hands one event to the machine and carries out what it asks, in order.
  /// An action that answers at once (a pooled upstream) feeds the machine
  /// again; its actions join the same queue.
  func run(_ event: (inout ExchangeMachine<UpstreamRef>, inout ExchangeMachine<UpstreamRef>.Actions) -> Void)
  {
    session.loop.preconditionInLoop()
    event(&machine, &actions)
    guard !running else { return }
    running = true
    defer { running = false }
    while let action = actions.popFirst() { execute(action) }
  }

  // MARK: From the session

  /// Arms the clock for the whole exchange: answered within `upstreamResponse`.
  func armTimer() {
    let seconds = session.snapshot.timeouts.upstreamResponse
    timer?.cancel()
    timer = session.loop.schedule(after: seconds) { [weak self] in self?.timerFired(after: seconds) }
  }

  private func timerFired(after seconds: Double) {
    guard session.streams[id] === self else { return }
    switch (hold, machine.phase) {
    case (.body, .waiting):
      run {
        $0.fail(
          ProxyFailure(
            status: 408, code: .badRequest, reason: "request body not received within \(seconds) s"),
          &$1)
      }
    case (.queue, .waiting):
      hold = .none
      run {
        $0.fail(
          ProxyFailure(
            status: 503, code: .overCapacity,
            reason: "no upstream slot of this connection came free within \(seconds) s"), &$1)
      }
    case (_, .exchanging):
      run { $0.responseTimerFired(after: seconds, &$1) }
    default:
      return
    }
    session.flush()
  }

  func requestBody(_ bytes: [UInt8]) {
    if machine.isDone {
      // Answered already: its DATA is dropped, its window kept open.
      return session.session.consume(stream: id, bytes.count)
    }
    run { $0.requestBody(bytes, &$1) }
  }

  func requestEnd(_ trailers: HTTPHeaders) { run { $0.requestEnd(trailers, &$1) } }

  /// The client is gone from this stream: an unfinished exchange's upstream
  /// is closed (an HTTP/1.1 connection) or reset (an h2 stream).
  func abandon() {
    timer?.cancel()
    run { $0.abandon(&$1) }
  }

  // MARK: UpstreamDelegate

  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent]) {
    // Body bytes are lent for this call only: the actions they become must
    // run now, not wait in the queue of a run already under way (upstream
    // events come from reads, which never happen inside a run).
    precondition(!running, "upstream events during a stream's run")
    run { $0.upstreamEvents(events, from: UpstreamRef(link: upstream), &$1) }
    session.flush()
  }

  func upstreamDidDrain(_ upstream: any UpstreamLink) {
    guard machine.isServed(by: UpstreamRef(link: upstream)), unconsumed > 0 else { return }
    session.session.consume(stream: id, unconsumed)
    unconsumed = 0
    session.flush()
  }

  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    let mayRetry = upstream.mayRetryAfterClose
    run { $0.upstreamClosed(UpstreamRef(link: upstream), failure: failure, mayRetry: mayRetry, &$1) }
    session.flush()
  }

  // MARK: Actions

  private func execute(_ action: ExchangeAction<UpstreamRef>) {
    switch action {
    case .respondInterim(let head):
      downstream.sendInterim(head)
    case .respondHead(let head, let upstream):
      if !downstream.sendHead(head, upstreamProtocol: machine.exchange.upstreamProtocol) {
        responseCannotStart(upstream)
      }
    case .respondBody(let bytes, let upstream):
      downstream.sendBody(bytes)
      // Back-pressure: a stream whose client does not keep up stops its upstream.
      if !upstreamPaused && session.pausesUpstream(of: self) {
        upstreamPaused = true
        upstream.link.pauseReading()
      }
    case .respondEnd(let trailers, _):
      downstream.end(trailers: trailers)
    case .acquireUpstream(let poolAllowed):
      session.acquire(for: self, poolAllowed: poolAllowed)
    case .sendHead(let upstream, let request):
      upstream.link.delegate = self
      upstream.link.sendHead(request)
    case .sendBody(let upstream, let bytes):
      upstream.link.sendBody(bytes)
      // Flow control is the back-pressure: what the upstream has not taken
      // is not acknowledged, so the client's window for this stream closes.
      if upstream.link.isAboveHighWatermark {
        unconsumed += bytes.count
      } else {
        session.session.consume(stream: id, bytes.count)
      }
    case .endBody(let upstream, let trailers):
      upstream.link.endBody(trailers: trailers)
    case .armResponseTimer:
      armTimer()
    case .cancelResponseTimer:
      timer?.cancel()
    case .releaseUpstream(let upstream):
      upstream.link.release(to: session.upstreamRelease)
    case .closeUpstream(let upstream):
      upstream.link.close()
    case .record(let record):
      record.report(
        to: session.context.logger, session.context.metrics, client: session.client.peer,
        listener: session.listener.name, loop: session.loop.index, user: session.loggedUser)
    case .refuse(let failure):
      session.refuse(id, machine.exchange.request, failure, target: target, started: machine.exchange.started)
    case .cutShort:
      // Part of the response went out: only a reset tells the client it is cut short.
      try? session.session.submitReset(stream: id, errorCode: HTTP2ErrorCode.internalError)
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
    timer?.cancel()
    upstream.link.close()
    try? session.session.submitReset(stream: id, errorCode: HTTP2ErrorCode.internalError)
  }
}
