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
  /// Where the registry lists it; kept by the registry alone.
  var registrySlot: RegistrySlot { get set }
}

/// A session's place in its loop's `SessionRegistry` (none until added):
/// listing and unlisting it index an array, hashing nothing.
struct RegistrySlot {
  fileprivate var index = -1
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
  /// Listed sessions by slot; freed slots are reused first, so the array is
  /// as long as the most sessions the loop held at once.
  private var slots: [Entry?] = []
  private var freeSlots: [Int] = []
  private(set) var listed = 0

  init(loop: EventLoop) { self.loop = loop }

  func add(_ session: any DrainableSession) {
    loop.preconditionInLoop()
    guard session.registrySlot.index < 0 else { return }
    let index = freeSlots.popLast() ?? slots.count
    if index == slots.count { slots.append(nil) }
    slots[index] = Entry(session: session)
    session.registrySlot.index = index
    listed += 1
  }

  func remove(_ session: any DrainableSession) {
    loop.preconditionInLoop()
    unlist(session)
  }

  /// For a session's `deinit`: its entry goes before its memory can be
  /// reused. In the daemon that runs on the loop; a test that drops the last
  /// reference on its own thread waits here for the loop instead.
  func forget(_ session: any DrainableSession) {
    if loop.inLoop {
      unlist(session)
    } else {
      loop.queue.sync { unlist(session) }
    }
  }

  private func unlist(_ session: any DrainableSession) {
    let index = session.registrySlot.index
    guard index >= 0, index < slots.count, let entry = slots[index],
      ObjectIdentifier(entry.session) == ObjectIdentifier(session)
    else { return }
    slots[index] = nil
    freeSlots.append(index)
    session.registrySlot.index = -1
    listed -= 1
  }

  /// The listed sessions, for a pass over all of them (and a test's look).
  var sessions: [any DrainableSession] { slots.compactMap { $0?.session } }

  func drainAll() {
    loop.preconditionInLoop()
    for session in sessions { session.drain() }
  }

  /// After a reload: every session reviews its client's access.
  func reviewAccess(under snapshot: RuntimeSnapshot) {
    loop.preconditionInLoop()
    for session in sessions { session.reviewAccess(under: snapshot) }
  }

  var count: Int {
    loop.preconditionInLoop()
    return listed
  }

  /// Closes the most expendable session of this loop (of `client`, an
  /// admission key, when given); false when none may go. A linear scan: it
  /// runs only at a connection limit.
  func evictOne(client: String? = nil) -> Bool {
    loop.preconditionInLoop()
    var best: (EvictionCandidate, any DrainableSession)?
    for session in sessions {
      guard let candidate = session.evictionCandidate else { continue }
      if let client, session.clientKey != client { continue }
      if best == nil || candidate < best!.0 { best = (candidate, session) }
    }
    guard let (_, victim) = best else { return false }
    victim.evict()
    return true
  }
}
