import PinEventLoop

extension UpstreamAcquirer {
  /// The acquirer of a session on `loop` deciding under `snapshot`, for the
  /// client whose admission key (`ClientKey`) is `client`, on its connection
  /// `connection` (`UpstreamBudget.connectionID`). `pool`: the loop's, when
  /// the caller holds it already.
  convenience init(
    context: ProxyContext, snapshot: RuntimeSnapshot, loop: EventLoop, pool: UpstreamPool? = nil,
    client: String,
    connection: UInt64
  ) {
    let pool = pool ?? context.pool(for: loop)
    self.init(
      pool: pool, dialer: pool.dialer(under: snapshot) { context.dialer(for: snapshot) }, loop: loop,
      limits: snapshot.httpLimits, metrics: context.metrics, idleTimeout: snapshot.timeouts.upstreamIdle,
      budget: context.budget, client: client, connection: connection)
  }
}
