import PinEventLoop

/// A session that can be asked to finish early (graceful shutdown).
protocol DrainableSession: AnyObject {
  /// Close now if idle; otherwise finish the exchange in flight and close.
  func drain()
  /// How expendable this connection is under overload; nil when it is
  /// mid-exchange and must not be cut.
  var evictionCandidate: EvictionCandidate? { get }
  /// Closes the connection to make room for a new one.
  func evict()
  /// The client's `host:port`, for logs.
  var clientPeer: String { get }
  /// The client's admission key (`ClientOrigin.key`), for eviction among
  /// one client's connections.
  var clientKey: String { get }
  /// A reload installed `snapshot`: a connection that no longer decides
  /// anything per request (a splice) closes if its client may no longer
  /// use the listener. Sessions that serve requests check each one instead.
  func reviewAccess(under snapshot: RuntimeSnapshot)
}

/// The live sessions of one loop, so a shutdown can reach the idle ones.
/// Confined to its loop (`loop.queue`): sessions register and leave on it,
/// and drain and eviction are dispatched onto it.
///
/// Entries are unretained, not weak: a weak reference would move every
/// retain and release of a session to the runtime's slow path (its count
/// kept in a side table) for the session's whole life. So every session
/// leaves the registry when it ends and, at the latest, in its `deinit`
/// (which runs on its loop: each session's last release happens there).
final class SessionRegistry: @unchecked Sendable {
  private struct Entry { unowned(unsafe) let session: any DrainableSession }
  let loop: EventLoop
  private var sessions: [ObjectIdentifier: Entry] = [:]

  init(loop: EventLoop) { self.loop = loop }

  func add(_ session: any DrainableSession) {
    loop.preconditionInLoop()
    sessions[ObjectIdentifier(session)] = Entry(session: session)
  }

  func remove(_ session: any DrainableSession) {
    loop.preconditionInLoop()
    sessions[ObjectIdentifier(session)] = nil
  }

  /// For a session's `deinit`: its entry goes before its memory can be
  /// reused. In the daemon that runs on the loop; a test that drops the last
  /// reference on its own thread waits here for the loop instead.
  func forget(_ id: ObjectIdentifier) {
    if loop.inLoop {
      sessions[id] = nil
    } else {
      loop.queue.sync { sessions[id] = nil }
    }
  }

  func drainAll() {
    loop.preconditionInLoop()
    for entry in sessions.values { entry.session.drain() }
  }

  /// After a reload: every session reviews its client's access.
  func reviewAccess(under snapshot: RuntimeSnapshot) {
    loop.preconditionInLoop()
    for entry in sessions.values { entry.session.reviewAccess(under: snapshot) }
  }

  var count: Int {
    loop.preconditionInLoop()
    return sessions.count
  }

  /// Closes the most expendable session of this loop (of `client`, an
  /// admission key, when given); false when none may go. A linear scan: it
  /// runs only at a connection limit.
  func evictOne(client: String? = nil) -> Bool {
    loop.preconditionInLoop()
    var best: (EvictionCandidate, any DrainableSession)?
    for entry in sessions.values {
      let session = entry.session
      guard let candidate = session.evictionCandidate else { continue }
      if let client, session.clientKey != client { continue }
      if best == nil || candidate < best!.0 { best = (candidate, session) }
    }
    guard let (_, victim) = best else { return false }
    victim.evict()
    return true
  }
}
