import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// One client connection of a forward listener: reads requests in
/// absolute-form, routes each through the domain policy table, forwards it
/// over a verified upstream connection and streams the response back.
///
/// Confined to its loop: every entry point (connection and upstream delegate
/// calls, timers, dial completions) runs on `loop.queue`.
final class ForwardSession: ConnectionDelegate, ClientChannelDelegate, DrainableSession, @unchecked Sendable {
  enum State {
    /// Between requests: idle, or part of a head has arrived.
    case awaitingRequest
    /// A request head was accepted; its upstream connection is being opened.
    case connecting(Exchange)
    /// Request and response are flowing.
    case exchanging(Exchange)
    /// A CONNECT to a passthrough host: raw bytes both ways, no interception,
    /// closed after `timeouts.tunnelIdle` of silence both ways.
    case splicing(UpstreamConnection, IdleWatch)
    /// The last bytes are being flushed; nothing more is read.
    case closing
  }

  /// The socket; `client` is what requests are read from and answered on
  /// (the socket, or TLS over it after an intercepted CONNECT).
  let connection: Connection
  var client: any ClientChannel
  let listener: ListenerConfig
  /// Set once an intercepted CONNECT switched the client to TLS: requests
  /// inside go to this host and port over TLS.
  var connectTarget: (host: TrustHost, port: Int)?
  var clientSplicedDone = false
  var upstreamSplicedDone = false
  let context: ProxyContext
  let snapshot: RuntimeSnapshot
  var state = State.awaitingRequest
  var parser: HTTP1Parser
  /// Parsed but not yet handled (body while connecting, pipelined requests).
  var pending: [HTTP1Parser.Event] = []
  var headTimer: LoopTimer?
  var headTimerIsIdle = false
  var servedRequests = 0
  var clientFinishedSending = false
  /// When the session last started waiting for a request (uptime ns), to
  /// pick the longest waiting under overload.
  var awaitingSince = DispatchTime.now().uptimeNanoseconds

  var loop: EventLoop { connection.loop }
  var pool: UpstreamPool { context.pool(for: loop) }

  init(connection: Connection, context: ProxyContext, listener: ListenerConfig) {
    self.connection = connection
    client = connection
    self.listener = listener
    self.context = context
    snapshot = context.snapshot
    parser = HTTP1Parser(role: .request, limits: snapshot.httpLimits, pausesBetweenMessages: true)
    connection.delegate = self
  }

  func start() {
    loop.preconditionInLoop()
    context.registry(for: loop).add(self)
    armHeadTimer()
    connection.resumeReading()
  }

  // MARK: Client bytes

  func connection(_ connection: Connection, didRead bytes: [UInt8]) { clientDidRead(bytes) }
  func connectionDidReadEOF(_ connection: Connection) { clientDidReadEOF() }
  func connectionDidDrain(_ connection: Connection) { clientDidDrain() }
  func connectionDidClose(_ connection: Connection, error: SocketError?) { clientDidClose() }

  func clientDidRead(_ bytes: [UInt8]) {
    loop.preconditionInLoop()
    if case .closing = state { return }
    if case .splicing(let upstream, let idle) = state {
      idle.touch()
      upstream.send(bytes)
      if upstream.isAboveHighWatermark { client.pauseReading() }
      return
    }
    do {
      pending += try parser.feed(bytes)
    } catch {
      return refuseMalformed(error)
    }
    if case .awaitingRequest = state, headTimerIsIdle, !parser.isIdle || !pending.isEmpty {
      armHeadTimer(idle: false)
    }
    process()
  }

  func clientDidReadEOF() {
    loop.preconditionInLoop()
    clientFinishedSending = true
    if case .splicing(let upstream, _) = state {
      clientSplicedDone = true
      upstream.finishSending()
      return finishSpliceIfDone()
    }
    do {
      pending += try parser.finish()
    } catch {
      // The client stopped in the middle of a request: nothing can complete it.
      return closeNow()
    }
    switch state {
    case .awaitingRequest where pending.isEmpty: closeNow()
    case .closing: break
    default: process()
    }
  }

  func clientDidDrain() {
    if case .exchanging(let exchange) = state { exchange.upstream?.resumeReading() }
    if case .splicing(let upstream, _) = state { upstream.resumeReading() }
  }

  func clientDidClose() {
    headTimer?.cancel()
    context.registry(for: loop).remove(self)
    releaseUpstream()
    state = .closing
    context.admission.release(client: connection.peer)
  }

  // MARK: Handling parsed events

  /// Handles queued events as far as the state allows.
  func process() {
    while let event = pending.first {
      switch (state, event) {
      case (.awaitingRequest, .request(let head)):
        pending.removeFirst()
        begin(head)
      case (.exchanging(let exchange), .body(let bytes)) where !exchange.requestComplete:
        pending.removeFirst()
        sendRequestBody(bytes, exchange)
      case (.exchanging(let exchange), .end(let trailers)) where !exchange.requestComplete:
        pending.removeFirst()
        finishRequestBody(exchange, trailers: trailers)
      case (.connecting(let exchange), .end) where !exchange.hasBody && !exchange.requestComplete:
        // A request without a body is complete at its head: no need to stop
        // reading (a pause and resume per request cost two epoll_ctl calls).
        pending.removeFirst()
        exchange.requestComplete = true
      default:
        // Wait: the upstream is not ready, or a pipelined request waits its turn.
        client.pauseReading()
        return
      }
    }
    if case .exchanging(let exchange) = state, exchange.upstream?.isAboveHighWatermark == true { return }
    if case .closing = state { return }
    // The next request waits unparsed until this exchange is done: stop
    // reading rather than buffer what a pipelining client sends ahead. After
    // a CONNECT head, bytes wait for the tunnel the same way.
    if (parser.isPaused && parser.hasBufferedInput) || parser.isUpgraded { return client.pauseReading() }
    client.resumeReading()
  }

  /// The exchange is over: parse what has arrived of the next request.
  func parseNextRequest() {
    do {
      pending += try parser.resume()
    } catch {
      // The client half-closed after part of a pipelined request: nothing can complete it.
      if error.kind == .truncated { return closeNow() }
      return refuseMalformed(error)
    }
    // Part of the next head is already here: it gets the header timeout, not the idle one.
    if case .awaitingRequest = state, !parser.isIdle || !pending.isEmpty { armHeadTimer(idle: false) }
    process()
  }

  private func begin(_ head: HTTPRequestHead) {
    headTimer?.cancel()
    let scheme: String
    let rawHost: String
    let explicitPort: Int?
    let path: String
    switch (head.target, connectTarget) {
    case (.authority(let host, let port), nil):
      return beginConnect(head, host: host, port: port)
    case (.origin(let originPath), let target?):
      // Inside an intercepted CONNECT the tunnel's host is authoritative.
      (scheme, rawHost, explicitPort, path) = ("https", target.host.description, target.port, originPath)
    case (.absolute(let urlScheme, let urlHost, let urlPort, let urlPath), nil):
      (scheme, rawHost, explicitPort, path) = (urlScheme, urlHost, urlPort, urlPath)
    case (_, _?):
      return fail(.badRequest("inside a CONNECT tunnel requests must use origin-form (GET /path)"), head)
    default:
      return fail(
        .badRequest("a forward proxy needs absolute-form requests, e.g. GET http://host/path"), head)
    }
    guard let host = TrustHost(rawHost) else {
      return fail(.badRequest("\"\(rawHost)\" is not a valid host"), head)
    }
    guard let route = UpstreamRoute(host: host, snapshot: snapshot) else {
      return fail(
        ProxyFailure(
          status: 403, code: .deniedByPolicy,
          reason: "no domain rule matches \(host) and defaults.action is deny"),
        head)
    }
    // A plain http:// request goes over TLS unless its rule allows insecure loads.
    let tls = scheme == "https" || !route.allowsInsecureHTTPLoads
    let port = explicitPort ?? (tls ? 443 : 80)
    // Inside an intercepted CONNECT the port was checked on the CONNECT line.
    if connectTarget == nil, let refusal = portRefusal(port) { return fail(refusal, head) }
    let key = UpstreamKey(host: host, port: port, tls: tls, policy: route.identity)
    let exchange = Exchange(request: head, key: key, route: route, path: path, client: client.peer)
    exchange.closeAfterResponse = !head.keepAlive || clientFinishedSending
    state = .connecting(exchange)
    acquireUpstream(for: exchange)
  }

  func acquireUpstream(for exchange: Exchange) {
    if let pooled = pool.take(exchange.key) { return attach(pooled, to: exchange) }
    let dialer = context.dialer(for: snapshot)
    dialer.open(exchange.key, route: exchange.route, on: loop) { [weak self] result in
      guard let self, case .connecting(let current) = self.state, current === exchange else {
        if case .success(let upstream) = result { upstream.close() }
        return
      }
      switch result {
      case .success(let upstream): self.attach(upstream, to: exchange)
      case .failure(let failure): self.fail(failure, exchange.request, exchange: exchange)
      }
    }
  }

  // MARK: Timers and endings

  /// Idle between requests (keep-alive), or bounded time to finish a head.
  func armHeadTimer(idle: Bool? = nil) {
    headTimer?.cancel()
    let isIdle = idle ?? (servedRequests > 0)
    headTimerIsIdle = isIdle
    let seconds = isIdle ? snapshot.timeouts.idleKeepAlive : snapshot.timeouts.clientHeader
    headTimer = loop.schedule(after: seconds) { [weak self] in
      guard let self, case .awaitingRequest = self.state else { return }
      if self.parser.isIdle && self.pending.isEmpty { return self.closeNow() }
      self.fail(
        ProxyFailure(status: 408, code: .badRequest, reason: "request head not received within \(seconds) s"),
        nil)
    }
  }

  private func refuseMalformed(_ error: HTTPParseError) {
    if case .exchanging(let exchange) = state, !exchange.requestComplete {
      // A body that breaks framing mid-stream: the upstream must not get the rest.
      exchange.upstream?.close()
      exchange.upstream = nil
      if exchange.responseStarted { return closeNow() }
    }
    fail(ProxyFailure(status: error.status, code: .badRequest, reason: error.reason), nil)
  }

  /// Answers with the failure, logs it, and closes after flushing.
  func fail(_ failure: ProxyFailure, _ request: HTTPRequestHead?, exchange: Exchange? = nil) {
    releaseUpstream()
    let host = exchange.map { $0.key.description } ?? request.map { String($0.rawTarget.prefix(200)) } ?? "-"
    let rule = exchange?.route.ruleName ?? "-"
    let fields: KeyValuePairs<String, String> = [
      "client": client.peer, "method": request?.method ?? "-", "target": host, "rule": rule,
      "status": String(failure.status),
      "code": failure.code.rawValue, "reason": failure.reason, "detail": failure.detail ?? "-",
      "chain": failure.chain ?? "-",
    ]
    context.logger.log(failure.status >= 500 ? .warning : .info, "refused", fields)
    context.metrics.increment("pinproxy_refusals_total", [failure.code.rawValue, rule])
    context.metrics.increment(
      "pinproxy_requests_total", [listener.name, ProxyMetrics.statusClass(failure.status)])
    headTimer?.cancel()
    state = .closing
    client.write(failure.response())
    client.closeAfterFlush()
  }

  /// Idle keep-alive connections go first under overload, then the ones
  /// still sending (or not yet sending) a head; never one mid-exchange.
  var evictionCandidate: EvictionCandidate? {
    if case .splicing(_, let idle) = state {
      // A raw tunnel nobody has used for a while; the client can reconnect.
      guard idle.idleSeconds >= EvictionCandidate.idleSpliceSeconds else { return nil }
      return EvictionCandidate(tier: .idleSplice, since: idle.lastActivity)
    }
    guard case .awaitingRequest = state else { return nil }
    let idle = servedRequests > 0 && parser.isIdle && pending.isEmpty
    return EvictionCandidate(tier: idle ? .idleKeepAlive : .unfinishedHead, since: awaitingSince)
  }

  func evict() {
    context.logger.log(.debug, "evicted", ["client": client.peer, "reason": "connection limit reached"])
    closeNow()
  }

  /// Graceful shutdown: an idle connection closes now; one with an exchange
  /// in flight finishes it and then closes (see `finishExchange`).
  func drain() {
    if case .awaitingRequest = state, parser.isIdle, pending.isEmpty { closeNow() }
  }

  func closeNow() {
    headTimer?.cancel()
    releaseUpstream()
    state = .closing
    client.close()
  }

  /// Closes the upstream connection of an exchange or splice in progress:
  /// mid-exchange its state is unknown, so it is never pooled. Every path
  /// that leaves such a state calls this before changing `state`.
  func releaseUpstream() {
    switch state {
    case .connecting(let exchange), .exchanging(let exchange):
      exchange.responseTimer?.cancel()
      exchange.upstream?.close()
      exchange.upstream = nil
    case .splicing(let upstream, let idle):
      idle.cancel()
      upstream.close()
    case .awaitingRequest, .closing: break
    }
  }
}

/// One request and its response. Confined to its session's loop.
final class Exchange: @unchecked Sendable {
  let request: HTTPRequestHead
  let key: UpstreamKey
  let route: UpstreamRoute
  let path: String
  let client: String
  let started = Date()
  var upstream: UpstreamConnection?
  var requestChunked = false
  var requestComplete = false
  var requestBodyBytes = 0
  var inInterimResponse = false
  var responseStarted = false
  var responseChunked = false
  var responseStatus = 0
  var responseBodyBytes = 0
  var closeAfterResponse = false
  var responseTimer: LoopTimer?
  var retried = false
  var upstreamWasPooled = false
  /// Framed with Content-Length or chunked; a request without either has no body.
  var hasBody: Bool {
    switch request.framing {
    case .none, .length(0): return false
    default: return true
    }
  }
  /// False once the origin said it closes (or spoke HTTP/1.0 without keep-alive).
  var upstreamKeepsAlive = true
  var upstreamTLS = "none"

  init(request: HTTPRequestHead, key: UpstreamKey, route: UpstreamRoute, path: String, client: String) {
    self.request = request
    self.key = key
    self.route = route
    self.path = path
    self.client = client
  }
}
