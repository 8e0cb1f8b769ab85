import PinEventLoop

/// What one event loop owns for the data path, made once per loop when the
/// proxy starts (`ProxyContext.loopState(for:)`) and reached once per
/// connection, which then holds it: the loop's upstream pool, its session
/// registry and its sock_diag socket. (The forward sessions' spare storage
/// is the loop's `ForwardStorageShelf`, kept with the loop itself, since
/// this folder sits below the forward machinery.) The loop's trust partition and
/// latency-histogram cells are its `index` into the process-wide trust
/// engine and metrics. What is process-wide (the snapshot, the trust
/// engine, admission, the budget, the logger and metrics) stays in
/// `ProxyContext`; the background tasks are `BackgroundServices`.
///
/// Confined to `loop`, every part: only the loop's own code uses it (the
/// pool and the registry assert so in their entry points; the socket is
/// asked only by the accepting loop, `ProxyContext.localPeer`).
final class LoopState: @unchecked Sendable {
  let loop: EventLoop
  let pool: UpstreamPool
  let registry: SessionRegistry
  /// Who owns the other end of a connection from this host; nil where the
  /// kernel offers no sock_diag.
  let sockDiag: SockDiagSocket?
  /// The last client key the loop's accepts made (`ClientOrigin`), and the
  /// admission entry it was last counted under: the next connection of the
  /// same client is counted in without hashing its key.
  var clientKeys = ClientKeyMemo()
  var lastClientCount: ClientCount?

  init(loop: EventLoop, pool: UpstreamPool) {
    self.loop = loop
    self.pool = pool
    registry = SessionRegistry(loop: loop)
    sockDiag = SockDiagSocket()
  }

  /// The loop's index: its trust partition and its histogram cells.
  var index: Int { loop.index }
}
