import Foundation
import PinEventLoop
import PinTrust
import Synchronization

/// What every session of a running proxy shares: the configuration snapshot,
/// the trust engine (and its fingerprint cache), TLS sessions, one upstream
/// pool per loop, the logger and the connection count.
final class ProxyContext: Sendable {
  private let current: Mutex<RuntimeSnapshot>
  let trustEngine: TrustEngine
  let sessions = TLSSessionCache()
  let logger: ProxyLogger
  private let pools: [ObjectIdentifier: UpstreamPool]
  let openConnections = Atomic<Int>(0)

  init(snapshot: RuntimeSnapshot, group: EventLoopGroup, logger: ProxyLogger) {
    current = Mutex(snapshot)
    trustEngine = TrustEngine(cache: FingerprintCache())
    self.logger = logger
    var pools: [ObjectIdentifier: UpstreamPool] = [:]
    for loop in group.loops { pools[ObjectIdentifier(loop)] = UpstreamPool(loop: loop) }
    self.pools = pools
  }

  /// The snapshot new connections start with.
  var snapshot: RuntimeSnapshot { current.withLock { $0 } }

  /// The pool of `loop`; only ever used on that loop.
  func pool(for loop: EventLoop) -> UpstreamPool {
    guard let pool = pools[ObjectIdentifier(loop)] else {
      preconditionFailure("loop outside the proxy's group")
    }
    return pool
  }
}
