import Dispatch
import PinEventLoop

/// What an exchange was, for the access log and metrics: read from the
/// exchange machine (`ExchangeMachine.record`) whichever protocol the client
/// spoke. A value made where it is reported: no action carries it.
/// It copies only what the access line says, not the exchange: the request
/// head stays the machine's (its storage serves the next head) and making
/// a record retains two references, not every field of a head.
struct ExchangeRecord {
  let method: String
  let target: ForwardTarget
  let started: UInt64
  let requestBodyBytes: Int
  let upstreamWasPooled: Bool
  let upstreamTLS: UpstreamTLS
  let upstreamProtocol: WireProtocol
  let clientProtocol: WireProtocol
  let status: Int
  let responseBytes: Int

  init(exchange: Exchange, status: Int, responseBytes: Int) {
    method = exchange.request.method
    target = exchange.target
    started = exchange.started
    requestBodyBytes = exchange.requestBodyBytes
    upstreamWasPooled = exchange.upstreamWasPooled
    upstreamTLS = exchange.upstreamTLS
    upstreamProtocol = exchange.upstreamProtocol
    clientProtocol = exchange.clientProtocol
    self.status = status
    self.responseBytes = responseBytes
  }

  /// Counts the request and records its duration (on loop `loop`'s
  /// histogram cells, timed by the loop's clock), and writes its access line (when the access log is
  /// on). `user`: the authenticated proxy user, given only where the
  /// listener's `proxyAuth.logUser` allows it to be logged and counted.
  /// `local` and `peer`: the client's socket owner on this host, and its
  /// address as lines show it (asked only when a line is written) — the
  /// parts of its `ClientOrigin` this needs, so a session that keeps its
  /// origin in a variable copies one reference per request, not the whole
  /// origin.
  func report(
    to logger: ProxyLogger, _ metrics: ProxyMetrics, local: LocalPeer?, peer: () -> String,
    listener: String, loop: EventLoop, user: String? = nil
  ) {
    // The loop's clock is read once per batch: a start stamped by the
    // clock itself later in the same batch counts as no time, not as a wrap.
    let now = max(loop.now, started)
    let elapsed = now - started
    metrics.request(listener: listener, status: status, nanoseconds: elapsed, loop: loop.index)
    if let user { metrics.userRequests.increment([listener, user]) }
    if let local { metrics.localActivity.request(local, now: now) }
    guard logger.access else { return }
    let path = logger.shownPath(target.path[...])
    let line = AccessLine(
      client: peer(), method: method, host: target.key.description,
      path: path.prefix(200), status: status, sent: requestBodyBytes,
      received: responseBytes, upstreamMilliseconds: Int(elapsed / 1_000_000),
      upstreamConnection: upstreamWasPooled ? "pooled" : "new",
      upstreamTLS: upstreamTLS.rawValue, upstreamProtocol: upstreamProtocol.rawValue,
      clientProtocol: clientProtocol.rawValue, user: user, parent: target.route.parent?.name)
    guard let local else { return logger.access(line) }
    // A local client's line names its program: written once the lookup
    // that started at accept has answered (at once, after the first).
    local.whenResolved {
      var line = line
      line.clientUser = local.user
      line.clientProgram = local.program
      logger.access(line)
    }
  }
}
