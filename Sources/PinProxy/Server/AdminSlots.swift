import Dispatch
import PinEventLoop
import PinTrust

/// The admin listener's connection slots, shared by every loop.
///
/// At most `AdminServer.maximumConnections` are open. A newcomer that finds
/// them all taken evicts the connection that has waited longest for its
/// request head (a slow or stalled sender: it loses nothing it was owed);
/// only when every slot holds a request already being answered is the
/// newcomer closed. So a local process that opens every slot and trickles
/// nothing cannot make a health probe fail, as the forward listener's
/// admission also does.
///
/// The heavy views (`/` and `/status`, gathered from every loop and
/// rendered) may hold at most `maximumConnections - scrapeReserve` slots at
/// once; past that they are answered 503, so health checks and metric
/// scrapes always have slots of their own.
final class AdminSlots: Sendable {
  static let scrapeReserve = 4

  private struct Entry {
    let loop: EventLoop
    let since: UInt64
    var waitingForHead = true
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

  /// Open connections (evicted ones leave at once).
  var count: Int { table.withLock { $0.entries.count } }

  /// A slot for a new connection on `loop`, whose `evict` closes it on that
  /// loop; nil when every slot is answering a request.
  func admit(on loop: EventLoop, evict: @escaping @Sendable () -> Void) -> UInt64? {
    let now = DispatchTime.now().uptimeNanoseconds
    let (id, victim): (UInt64?, Entry?) = table.withLock { table in
      var victim: Entry?
      if table.entries.count >= capacity {
        let oldest = table.entries.filter(\.value.waitingForHead).min { $0.value.since < $1.value.since }
        guard let oldest else { return (nil, nil) }
        victim = table.entries.removeValue(forKey: oldest.key)
        if victim?.heavy == true { table.heavy -= 1 }
      }
      table.nextID += 1
      table.entries[table.nextID] = Entry(loop: loop, since: now, evict: evict)
      return (table.nextID, victim)
    }
    if let victim { victim.loop.execute(victim.evict) }
    return id
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
