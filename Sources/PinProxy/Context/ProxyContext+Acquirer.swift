import PinEventLoop

extension UpstreamAcquirer {
  /// The acquirer of a session on `loop` deciding under `snapshot`, for the
  /// client whose admission key (`ClientKey`) is `client`, on its connection
  /// `connection` (`UpstreamBudget.connectionID`).
  init(context: ProxyContext, snapshot: RuntimeSnapshot, loop: EventLoop, client: String, connection: UInt64)
  {
    pool = context.pool(for: loop)  // once per session and snapshot
    dialer = context.dialer(for: snapshot)
    self.loop = loop
    limits = snapshot.httpLimits
    metrics = context.metrics
    idleTimeout = snapshot.timeouts.upstreamIdle
    budget = context.budget
    self.client = client
    self.connection = connection
  }
}
