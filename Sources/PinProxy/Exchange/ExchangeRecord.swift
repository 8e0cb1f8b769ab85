import Dispatch

/// What an exchange was, for the access log and metrics: read from the
/// exchange machine (`ExchangeMachine.record`) whichever protocol the client
/// spoke. A value made where it is reported: no action carries it.
struct ExchangeRecord {
  let exchange: Exchange
  let status: Int
  let responseBytes: Int

  init(exchange: Exchange, status: Int, responseBytes: Int) {
    self.exchange = exchange
    self.status = status
    self.responseBytes = responseBytes
  }

  /// Counts the request and records its duration (on loop `loop`'s
  /// histogram cells), and writes its access line (when the access log is
  /// on). `user`: the authenticated proxy user, given only where the
  /// listener's `proxyAuth.logUser` allows it to be logged and counted.
  func report(
    to logger: ProxyLogger, _ metrics: ProxyMetrics, client: String, listener: String, loop: Int,
    user: String? = nil
  ) {
    let elapsed = DispatchTime.nanoseconds(since: exchange.started)
    metrics.request(listener: listener, status: status, nanoseconds: elapsed, loop: loop)
    if let user { metrics.userRequests.increment([listener, user]) }
    guard logger.access else { return }
    let path = logger.shownPath(exchange.target.path[...])
    logger.access(
      AccessLine(
        client: client, method: exchange.request.method, host: exchange.target.key.description,
        path: path.prefix(200), status: status, sent: exchange.requestBodyBytes,
        received: responseBytes, upstreamMilliseconds: Int(elapsed / 1_000_000),
        upstreamConnection: exchange.upstreamWasPooled ? "pooled" : "new",
        upstreamTLS: exchange.upstreamTLS.rawValue, upstreamProtocol: exchange.upstreamProtocol.rawValue,
        clientProtocol: exchange.clientProtocol.rawValue, user: user))
  }
}
