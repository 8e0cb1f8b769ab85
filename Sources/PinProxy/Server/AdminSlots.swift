import Dispatch
import PinEventLoop
import PinTrust

/// The admin listener's connection slots, shared by every loop.
///
/// At most `AdminServer.maximumConnections` are open. A newcomer that finds
/// them all taken evicts a connection still waiting for its request head
/// (it loses nothing it was owed): first one that has sent part of a head
/// and stalled, the longest waiting first; only when there is none, one
/// that has sent nothing yet. A connection just accepted has not been read
/// yet even when its whole head is already on its way — a health probe
/// sends it at once — so it goes last, and not within `unreadGrace` of
/// its accept: a local process that keeps every slot filled with half-sent
/// heads and re-opens each one the moment it is evicted cannot push a probe
/// out before the probe is read. Only when no slot may go is the newcomer
/// closed.
///
/// The heavy views (`/` and `/status`, gathered from every loop and
/// rendered) may hold at most `maximumConnections - scrapeReserve` slots at
/// once; past that they are answered 503, so health checks and metric
/// scrapes always have slots of their own.
final class AdminSlots: Sendable {
  static let scrapeReserve = 4
  /// How long a connection that has sent nothing yet is kept from eviction
  /// (nanoseconds): long enough for a local or LAN probe's head to be read.
  static let unreadGrace: UInt64 = 250_000_000

  private struct Entry {
    let loop: EventLoop
    let since: UInt64
    var waitingForHead = true
    /// Part of a head has been read: a stalled sender, evicted first.
    var sentPartOfHead = false
    var heavy = false
    let evict: @Sendable () -> Void
  }
  private struct Table {
    var entries: [UInt64: Entry] = [:]
    var nextID: UInt64 = 0
    var heavy = 0
  }
  private let table = Locked(Table())
  let capacity: Int

  init(capacity: Int) { self.capacity = capacity }

  /// The slots held now (for tests).
  var testingIDs: [UInt64] { table.withLock { Array($0.entries.keys) } }

  /// Open connections (evicted ones leave at once).
  var count: Int { table.withLock { $0.entries.count } }

  /// What a new connection had sent by the time it was accepted (a look
  /// at its socket, nothing consumed).
  enum Arrival {
    case nothing
    case partOfHead
    /// A whole head (a health probe sends it at once): answered at once.
    case wholeHead
  }

  /// Connections with a whole head already there that may be admitted past
  /// `capacity` when no slot may go: a probe is answered in microseconds.
  static let answeringOverflow = 4

  /// A slot for a new connection on `loop`, whose `evict` closes it on that
  /// loop; nil when no slot may go (and, for a whole head, the overflow is full).
  func admit(on loop: EventLoop, arrival: Arrival = .nothing, evict: @escaping @Sendable () -> Void)
    -> UInt64?
  {
    let now = DispatchTime.now().uptimeNanoseconds
    let (id, victim): (UInt64?, Entry?) = table.withLock { table in
      var victim: Entry?
      if table.entries.count >= capacity {
        // One not read yet is given `unreadGrace` to be read before it may go.
        let oldest = table.entries.filter {
          $0.value.waitingForHead && ($0.value.sentPartOfHead || now &- $0.value.since >= Self.unreadGrace)
        }.min {
          ($0.value.sentPartOfHead ? 0 : 1, $0.value.since) < (
            $1.value.sentPartOfHead ? 0 : 1, $1.value.since
          )
        }
        if let oldest {
          victim = table.entries.removeValue(forKey: oldest.key)
          if victim?.heavy == true { table.heavy -= 1 }
        } else if arrival != .wholeHead || table.entries.count >= capacity + Self.answeringOverflow {
          return (nil, nil)
        }
      }
      table.nextID += 1
      var entry = Entry(loop: loop, since: now, evict: evict)
      entry.sentPartOfHead = arrival == .partOfHead
      table.entries[table.nextID] = entry
      return (table.nextID, victim)
    }
    if let victim { victim.loop.execute(victim.evict) }
    return id
  }

  /// Part of the connection's head arrived, not all of it.
  func partOfHeadArrived(_ id: UInt64) {
    table.withLock { table in table.entries[id]?.sentPartOfHead = true }
  }

  /// The connection's head arrived: it is no longer evictable. A heavy
  /// view takes one of the non-reserved slots; false when none is left.
  func headArrived(_ id: UInt64, heavy: Bool) -> Bool {
    table.withLock { table in
      guard var entry = table.entries[id] else { return true }
      entry.waitingForHead = false
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
      if table.entries.removeValue(forKey: id)?.heavy == true { table.heavy -= 1 }
    }
  }
}
