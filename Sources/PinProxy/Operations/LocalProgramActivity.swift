import Dispatch
import PinTrust
import Synchronization

/// Requests and refusals of the programs on this host, by user and
/// program, over the last hour, for `/status` and the operator's page.
/// Not a metric label: program names would make one series each.
///
/// One cell per minute per program (a ring of 60), at most
/// `maximumPrograms` programs; past that, the one least recently active
/// makes room.
final class LocalProgramActivity: LocalActivitySink {
  typealias Key = LocalProgramKey

  /// An object, changed where the table holds it (under the table's lock):
  /// a dictionary's in-place `modify` of a value this size allocates. The
  /// peers counting into it remember it (`LocalPeer.count`).
  private final class Counts: LocalActivityCells {
    let user: String
    var minutes = [Int](repeating: -1, count: 60)
    var requests = [Int](repeating: 0, count: 60)
    var refusals = [Int](repeating: 0, count: 60)
    var lastMinute = 0

    init(user: String) { self.user = user }

    func add(minute: Int, requests: Int, refusals: Int) {
      let slot = minute % 60
      if minutes[slot] != minute {
        (minutes[slot], self.requests[slot], self.refusals[slot]) = (minute, 0, 0)
      }
      self.requests[slot] += requests
      self.refusals[slot] += refusals
      lastMinute = minute
    }

    func total(_ cells: [Int], since minute: Int) -> Int {
      (0..<60).reduce(0) { sum, slot in
        minutes[slot] > minute - 60 && minutes[slot] >= 0 ? sum + cells[slot] : sum
      }
    }
  }

  private let table = Locked<[Key: Counts]>([:])
  static let maximumPrograms = 128
  /// Whether anyone can see the table: only `/status` and the operator's
  /// page show it, both on the admin endpoint, which is bound at start or
  /// never. Without it nothing is counted, and no connection has its
  /// program looked up for the table (a scan of /proc per loopback client
  /// that nobody would read); access and refusal lines still look up theirs.
  let isShown: Bool

  init(shown: Bool = true) { isShown = shown }

  /// A program's activity over the last hour.
  struct Summary: Sendable, Codable, Equatable {
    let user: String
    let program: String
    let requests: Int
    let refusals: Int
  }

  /// A request answered for `local` (served or refused).
  func request(_ local: LocalPeer, now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
    guard isShown else { return }
    local.count(in: self, requests: 1, refusals: 0, now: now)
  }

  /// A refusal of `local` (a request's, or its TLS handshake's).
  func refusal(_ local: LocalPeer, now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
    guard isShown else { return }
    local.count(in: self, requests: 0, refusals: 1, now: now)
  }

  /// Counts for a program, `user` naming its owner (`LocalPeer.count`).
  @discardableResult
  func add(_ key: Key, user: String, requests: Int, refusals: Int, now: UInt64) -> LocalActivityCells {
    let minute = Int(now / 60_000_000_000)
    return table.withLock { table in
      // One look-up when the table has room (the usual case).
      if table.count >= LocalProgramActivity.maximumPrograms, table[key] == nil,
        let stalest = table.min(by: { $0.value.lastMinute < $1.value.lastMinute })?.key
      {
        table.removeValue(forKey: stalest)?.dropped = true
      }
      let counts: Counts
      if let existing = table[key] {
        counts = existing
      } else {
        counts = Counts(user: user)
        table[key] = counts
      }
      counts.add(minute: minute, requests: requests, refusals: refusals)
      return counts
    }
  }

  /// Counts into a program's cells that `add` returned, while the table
  /// still holds them.
  func add(to cells: LocalActivityCells, requests: Int, refusals: Int, now: UInt64) -> Bool {
    let minute = Int(now / 60_000_000_000)
    return table.withLock { _ in
      guard !cells.dropped else { return false }
      // Only this table makes cells, and a peer counts into the table it had them from.
      unsafeDowncast(cells, to: Counts.self).add(minute: minute, requests: requests, refusals: refusals)
      return true
    }
  }

  /// The `count` programs with the most requests and refusals in the last
  /// hour, busiest first.
  func top(_ count: Int, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> [Summary] {
    let minute = Int(now / 60_000_000_000)
    let all = table.withLock { table in
      table.map { key, counts in
        Summary(
          user: counts.user, program: key.program, requests: counts.total(counts.requests, since: minute),
          refusals: counts.total(counts.refusals, since: minute))
      }
    }
    return all.filter { $0.requests + $0.refusals > 0 }
      .sorted { ($0.requests + $0.refusals, $1.program) > ($1.requests + $1.refusals, $0.program) }
      .prefix(count).map { $0 }
  }
}
