import PinEventLoop

extension UpstreamAcquirer {
  /// The acquirer of a session on `loop` deciding under `snapshot`, for the
  /// client whose admission key (`ClientKey`) is `client`, on its connection
  /// `connection` (`UpstreamBudget.connectionID`).
  convenience init(
    context: ProxyContext, snapshot: RuntimeSnapshot, loop: EventLoop, client: String, connection: UInt64
  ) {
    self.init(
      pool: context.pool(for: loop), dialer: context.dialer(for: snapshot), loop: loop,
      limits: snapshot.httpLimits, metrics: context.metrics, idleTimeout: snapshot.timeouts.upstreamIdle,
      budget: context.budget, client: client, connection: connection)
  }
}
