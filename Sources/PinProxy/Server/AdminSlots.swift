import Dispatch
import PinEventLoop
import PinTrust

/// The admin listener's connection slots, shared by every loop.
///
/// A connection is judged by what it sent, never by how fast the loop got to
/// it. One that has sent nothing yet is *undecided*: it waits outside the
/// slots, in a table of `undecidedCapacity` where a newcomer pushes out the
/// oldest. Its first bytes decide it: part of a head takes a slot, a whole
/// head (a health probe sends it at once) is being answered. At most
/// `capacity` decided connections are open; a newcomer that finds them all
/// taken evicts the one that has waited longest on a half-sent head (it loses
/// nothing it was owed), and a whole head with no slot to free may take one
/// of `answeringOverflow` more. Only when neither is possible is the
/// newcomer closed.
///
/// So local processes that hold half-sent heads and re-open each one the
/// moment it is closed cannot push out a probe: the probe's whole head is
/// never evictable, and while it waits to be read it is pushed out of the
/// undecided table only by `undecidedCapacity` newer silent connections
/// (holders with fewer connections than slots plus that can never get there).
///
/// The heavy views (`/` and `/status`, gathered from every loop and
/// rendered) may hold at most `capacity - scrapeReserve` slots at once; past
/// that they are answered 503, so health checks and metric scrapes always
/// have slots of their own.
final class AdminSlots: Sendable {
  static let scrapeReserve = 4
  /// Connections that have sent nothing yet, held outside the slots.
  static let undecidedCapacity = 32
  /// Connections with a whole head that may be admitted past `capacity` when
  /// no slot may go: a probe is answered in microseconds.
  static let answeringOverflow = 4

  private struct Entry {
    let loop: EventLoop
    let since: UInt64
    /// Nothing read yet: outside the slots.
    var undecided = false
    var waitingForHead = true
    /// Part of a head has been read and no whole one: a stalled sender,
    /// the one to evict.
    var sentPartOfHead = false
    var heavy = false
    let evict: @Sendable () -> Void
  }
  private struct Table {
    var entries: [UInt64: Entry] = [:]
    var nextID: UInt64 = 0
    var heavy = 0
    var undecided = 0
    var decided: Int { entries.count - undecided }
  }
  private let table = Locked(Table())
  let capacity: Int

  init(capacity: Int) { self.capacity = capacity }

  /// The slots held now (for tests).
  var testingIDs: [UInt64] { table.withLock { Array($0.entries.keys) } }

  /// Open connections, undecided ones included (evicted ones leave at once).
  var count: Int { table.withLock { $0.entries.count } }

  /// What a connection had sent when it was judged: at its accept (a look
  /// at its socket, nothing consumed) or at its first read.
  enum Arrival {
    case nothing
    case partOfHead
    /// A whole head (a health probe sends it at once): answered at once.
    case wholeHead
  }

  /// A place for a new connection on `loop`, whose `evict` closes it on that
  /// loop; nil when it must be closed (a head with no slot that may go).
  func admit(on loop: EventLoop, arrival: Arrival = .nothing, evict: @escaping @Sendable () -> Void)
    -> UInt64?
  {
    let now = DispatchTime.now().uptimeNanoseconds
    let (id, victim): (UInt64?, Entry?) = table.withLock { table in
      table.nextID += 1
      let id = table.nextID
      var entry = Entry(loop: loop, since: now, evict: evict)
      guard arrival != .nothing else {
        var victim: Entry?
        if table.undecided >= Self.undecidedCapacity,
          let oldest = table.entries.filter({ $0.value.undecided }).min(by: {
            $0.value.since < $1.value.since
          })
        {
          victim = table.entries.removeValue(forKey: oldest.key)
          table.undecided -= 1
        }
        entry.undecided = true
        table.undecided += 1
        table.entries[id] = entry
        return (id, victim)
      }
      let room = Self.makeRoom(in: &table, for: arrival, capacity: capacity)
      if case .none = room { return (nil, nil) }
      entry.sentPartOfHead = arrival == .partOfHead
      table.entries[id] = entry
      if case .evicted(let victim) = room { return (id, victim) }
      return (id, nil)
    }
    if let victim { victim.loop.execute(victim.evict) }
    return id
  }

  /// The first bytes of an undecided connection were read: it takes a slot
  /// now (evicting a stalled half-head if it must). False when it must be
  /// closed instead: no slot may go, or it was pushed out meanwhile. A
  /// connection decided at its accept is left as it is.
  func decide(_ id: UInt64, _ arrival: Arrival) -> Bool {
    let (kept, victim): (Bool, Entry?) = table.withLock { table in
      guard let entry = table.entries[id] else { return (false, nil) }
      guard entry.undecided, arrival != .nothing else { return (true, nil) }
      table.entries[id] = nil
      table.undecided -= 1
      let room = Self.makeRoom(in: &table, for: arrival, capacity: capacity)
      if case .none = room { return (false, nil) }
      var decided = entry
      decided.undecided = false
      decided.sentPartOfHead = arrival == .partOfHead
      table.entries[id] = decided
      if case .evicted(let victim) = room { return (true, victim) }
      return (true, nil)
    }
    if let victim { victim.loop.execute(victim.evict) }
    return kept
  }

  private enum Room {
    case free
    /// A stalled half-head was taken out of the table for the newcomer.
    case evicted(Entry)
    case none
  }

  /// A slot for a connection that sent `arrival`: free, made by evicting
  /// the longest-stalled half-head, or (a whole head) one of the overflow.
  private static func makeRoom(in table: inout Table, for arrival: Arrival, capacity: Int) -> Room {
    guard table.decided >= capacity else { return .free }
    let stalled = table.entries.filter {
      !$0.value.undecided && $0.value.waitingForHead && $0.value.sentPartOfHead
    }
    .min { $0.value.since < $1.value.since }
    if let stalled, let victim = table.entries.removeValue(forKey: stalled.key) {
      if victim.heavy { table.heavy -= 1 }
      return .evicted(victim)
    }
    return arrival == .wholeHead && table.decided < capacity + answeringOverflow ? .free : .none
  }

  /// The connection's head arrived: it is no longer evictable. A heavy
  /// view takes one of the non-reserved slots; false when none is left.
  func headArrived(_ id: UInt64, heavy: Bool) -> Bool {
    table.withLock { table in
      guard var entry = table.entries[id] else { return true }
      entry.waitingForHead = false
      entry.sentPartOfHead = false
      if heavy {
        guard table.heavy < capacity - Self.scrapeReserve else {
          table.entries[id] = entry
          return false
        }
        table.heavy += 1
        entry.heavy = true
      }
      table.entries[id] = entry
      return true
    }
  }

  /// The connection closed (or was evicted: then this does nothing).
  func release(_ id: UInt64) {
    table.withLock { table in
      guard let entry = table.entries.removeValue(forKey: id) else { return }
      if entry.heavy { table.heavy -= 1 }
      if entry.undecided { table.undecided -= 1 }
    }
  }
}
