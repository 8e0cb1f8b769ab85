import PinEventLoop
import PinTrust
import Synchronization

/// Where a local peer's requests and refusals are counted by program
/// (`LocalProgramActivity`): counts made before the program is known wait
/// in the peer and are added when the lookup answers.
protocol LocalActivitySink: AnyObject, Sendable {
  /// Counts for a program; returns its cells, which the peer counts into
  /// directly from then on (`add(to:)`): no key hashed per request.
  @discardableResult
  func add(_ key: LocalProgramKey, user: String, requests: Int, refusals: Int, now: UInt64)
    -> LocalActivityCells
  /// Counts into cells an earlier `add` of this sink returned; false (and
  /// nothing counted) when the sink let go of them since, to make room.
  func add(to cells: LocalActivityCells, requests: Int, refusals: Int, now: UInt64) -> Bool
}

/// One program's cells in a `LocalActivitySink`, as a peer remembers them.
/// Its fields are the sink's, changed under the sink's lock.
class LocalActivityCells: @unchecked Sendable {
  /// The sink let go of these cells: counts for the program go through its key again.
  var dropped = false
}

/// A client connecting from this host, known by the socket at its end of
/// the connection: the user that owns it (from the kernel at accept), and
/// the program holding it (found off the loops when first needed; see
/// `LocalPrograms`). A peer whose owner the kernel could not tell is
/// unknown: `uid` nil, shown as "unknown", never taken for another user.
final class LocalPeer: Sendable {
  let uid: UInt32?
  /// The socket's inode: what finds the process (`/proc/PID/fd`).
  let inode: UInt32
  /// The client socket's 4-tuple as the kernel was asked for it: whether
  /// the socket still exists is asked again before its process is looked for.
  let tuple: SocketTuple?
  /// Made per connection: a `Mutex` stored in the peer itself, so a
  /// loopback connection allocates no lock object of its own.
  private let found = Mutex<Found>(Found())

  struct Found: Sendable {
    var user: String?
    var program: String?
    var pid: Int32?
    /// A lookup was asked for (once per peer).
    var asked = false
    /// The lookup answered (found or not).
    var resolved = false
    /// Work waiting for the answer (log lines), at most `maximumWaiting`.
    var waiting: [@Sendable () -> Void] = []
    /// The program's key in `LocalProgramActivity`, made once it is known.
    var activityKey: LocalProgramKey?
    /// Requests and refusals counted before the answer, with the table
    /// they go to once it comes (`count(in:requests:refusals:now:)`): a
    /// number each, not a closure per request.
    var pending: (activity: any LocalActivitySink, requests: Int, refusals: Int, since: UInt64)?
    /// The program's cells in the sink last counted into (`count(in:)`).
    var cells: (sink: any LocalActivitySink, cells: LocalActivityCells)?
  }

  /// Log lines one peer may have waiting for its lookup; past it they are
  /// written at once, naming the program "unknown".
  static let maximumWaiting = 64

  init(owner: SocketOwner?, tuple: SocketTuple? = nil) {
    uid = owner?.uid
    inode = owner?.inode ?? 0
    self.tuple = tuple
    // Nothing to look up for an unknown peer.
    if owner == nil { found.withLock { $0.resolved = true } }
  }

  /// The user's name once `LocalPrograms` looked it up, else the uid;
  /// "unknown" when the kernel did not tell.
  var user: String { found.withLock { userName($0) } }

  /// The executable's name once found; "unknown" until then, or when the
  /// process could not be found or inspected.
  var program: String { found.withLock { Self.programName($0) } }

  private func userName(_ found: Found) -> String { uid.map { found.user ?? String($0) } ?? "unknown" }
  private static func programName(_ found: Found) -> String { found.program ?? "unknown" }

  var pid: Int32? { found.withLock { $0.pid } }

  /// Counts a request or refusal in `activity`: at once when the lookup
  /// has answered, else added to what waits for the answer (and the lookup
  /// asked for, once).
  func count(in table: any LocalActivitySink, requests: Int, refusals: Int, now: UInt64) {
    enum Step {
      case waiting(first: Bool)
      case cells(LocalActivityCells)
      case key(LocalProgramKey, user: String)
    }
    let step = found.withLock { found -> Step in
      guard found.resolved else {
        let before = found.pending
        found.pending = (
          table, (before?.requests ?? 0) + requests, (before?.refusals ?? 0) + refusals, before?.since ?? now
        )
        return .waiting(first: before == nil)
      }
      if let remembered = found.cells, remembered.sink === table { return .cells(remembered.cells) }
      let known = activity(of: &found)
      return .key(known.key, user: known.user)
    }
    switch step {
    case .waiting(let first):
      if first { lookUp() }
    case .cells(let cells):
      if table.add(to: cells, requests: requests, refusals: refusals, now: now) { return }
      // Dropped to make room: counted through the key, and remembered anew.
      found.withLock { $0.cells = nil }
      count(in: table, requests: requests, refusals: refusals, now: now)
    case .key(let key, let user):
      let cells = table.add(key, user: user, requests: requests, refusals: refusals, now: now)
      found.withLock { found in
        // Unless the lookup answered again meanwhile (another program).
        if found.activityKey == key { found.cells = (table, cells) }
      }
    }
  }

  /// The program's key in the activity table and the user's name: the key
  /// is made (and hashed) once per peer, not per request.
  private func activity(of found: inout Found) -> (key: LocalProgramKey, user: String) {
    if found.activityKey == nil {
      found.activityKey = LocalProgramKey(uid: uid, program: Self.programName(found))
    }
    return (found.activityKey!, userName(found))
  }

  /// Whether the lookup has answered (or there was nothing to look up).
  var isResolved: Bool { found.withLock { $0.resolved } }

  /// Starts the lookup (once per peer; off the loops).
  func lookUp(urgent: Bool = false) { LocalPrograms.shared.lookUp(self, urgent: urgent) }

  /// Runs `work` once the lookup has answered: now when it has, else on
  /// the lookup's queue when it does (starting it if nobody had).
  /// `urgent`: a refused client waits for it (`LocalPrograms.urgentWalkInterval`).
  func whenResolved(urgent: Bool = false, _ work: @escaping @Sendable () -> Void) {
    let now = found.withLock { found in
      guard !found.resolved, found.waiting.count < LocalPeer.maximumWaiting else { return true }
      found.waiting.append(work)
      return false
    }
    if now { return work() }
    lookUp(urgent: urgent)
  }

  /// Whether this call is the first to ask for the lookup.
  func markAsked() -> Bool {
    found.withLock { found in
      defer { found.asked = true }
      return !found.asked
    }
  }

  /// The lookup's answer; counts what waited for it, then runs the rest.
  func record(user: String?, program: String?, pid: Int32?) {
    let (waiting, pending, known) = found.withLock { found in
      if let user { found.user = user }
      if let program { found.program = program }
      if let pid { found.pid = pid }
      found.resolved = true
      found.activityKey = nil
      found.cells = nil
      defer { (found.waiting, found.pending) = ([], nil) }
      return (found.waiting, found.pending, activity(of: &found))
    }
    if let pending {
      pending.activity.add(
        known.key, user: known.user, requests: pending.requests, refusals: pending.refusals,
        now: pending.since)
    }
    for work in waiting { work() }
  }
}
