import PinEventLoop

/// A session that can be asked to finish early (graceful shutdown).
protocol DrainableSession: AnyObject {
  /// Close now if idle; otherwise finish the exchange in flight and close.
  func drain()
}

/// The live sessions of one loop, so a shutdown can reach the idle ones.
/// Confined to its loop.
final class SessionRegistry: @unchecked Sendable {
  private struct Weak { weak var session: (any DrainableSession)? }
  private var sessions: [ObjectIdentifier: Weak] = [:]

  func add(_ session: any DrainableSession) { sessions[ObjectIdentifier(session)] = Weak(session: session) }
  func remove(_ session: any DrainableSession) { sessions[ObjectIdentifier(session)] = nil }

  func drainAll() {
    for entry in sessions.values { entry.session?.drain() }
  }

  var count: Int { sessions.count }
}
