import Foundation
import PinConfig
import PinEventLoop
import PinTrust
import Synchronization

/// Decides whether a new client connection may open, and keeps the counts.
///
/// Two limits: `limits.maxConnections` for the process and
/// `limits.maxConnectionsPerClient` for one client address. At the process
/// limit a new connection is not simply refused — that would let one client
/// that opens slots and trickles nothing keep everyone else out. Instead the
/// loop that accepted it closes the connection it can best spare (see
/// `EvictionCandidate`), as HAProxy and Envoy do under overload, and only
/// refuses (503) when every connection on that loop is mid-exchange. At
/// one client's limit the same is done among that client's connections, so
/// a client trickling heads on most of its slots cannot lock out its own
/// (or, for loopback, every local process's) next connection.
final class ConnectionAdmission: Sendable {
  private let perClient = Locked<ClientCounts>(ClientCounts())

  /// Open connections per client, one `ClientCount` each. A client whose
  /// count fell to 0 keeps its entry, up to `zeroesKept` of them (then
  /// every zero goes at once): a client connecting again and again (a
  /// connection per request) then finds its entry instead of inserting and
  /// removing it each time, and the table holds the clients with
  /// connections plus at most that many. The entry is also what a ticket
  /// and a loop's memo hold, so counting a connection in and out hashes
  /// nothing while the entry is listed.
  private struct ClientCounts {
    var entries: [String: ClientCount] = [:]
    var zeroes = 0
    static let zeroesKept = 64

    /// One more for `client` unless it has `limit` already: `remembered`
    /// (the entry the caller last had for this key) when still listed,
    /// else the table's, made when there is none.
    mutating func add(_ client: String, remembered: ClientCount?, limit: Int) -> ClientCount? {
      let entry: ClientCount
      if let remembered, remembered.listed, remembered.key == client {
        entry = remembered
      } else if let found = entries[client] {
        entry = found
      } else {
        guard limit > 0 else { return nil }
        entry = ClientCount(key: client)
        entry.open = 1
        entries[client] = entry
        return entry
      }
      guard entry.open < limit else { return nil }
      if entry.open == 0 { zeroes -= 1 }
      entry.open += 1
      return entry
    }

    /// One fewer for `entry`'s client; no look-up.
    mutating func remove(_ entry: ClientCount) {
      guard entry.listed, entry.open > 0 else { return }
      entry.open -= 1
      guard entry.open == 0 else { return }
      zeroes += 1
      if zeroes > Self.zeroesKept {
        for entry in entries.values where entry.open == 0 { entry.listed = false }
        entries = entries.filter { $0.value.open > 0 }
        zeroes = 0
      }
    }
  }
  let open = Atomic<Int>(0)
  /// Refused connections being closed lingeringly (so that the 503 is read,
  /// not reset); past `maxRefusedLingering` they are closed at once.
  private let refusedLingering = Atomic<Int>(0)
  static let maxRefusedLingering = 256

  enum Decision: Equatable {
    case admitted
    case clientLimit(Int)
    case processLimit(Int)
  }

  /// Counts the connection in, or says which limit refused it. Runs on the
  /// accepting loop; `evict` closes a spare connection of that loop, of the
  /// given client address when one is named.
  func admit(client address: String, limits: LimitsConfig, evict: (_ client: String?) -> Bool) -> Decision {
    admit(client: address, remembered: nil, limits: limits, evict: evict).decision
  }

  /// The same, with the entry the caller last had for `address` (its
  /// loop's memo), and the entry counted in when admitted: its ticket's.
  func admit(
    client address: String, remembered: ClientCount?, limits: LimitsConfig, evict: (_ client: String?) -> Bool
  ) -> (decision: Decision, entry: ClientCount?) {
    var entry = perClient.withLock {
      $0.add(address, remembered: remembered, limit: limits.maxConnectionsPerClient)
    }
    if entry == nil {
      // The victim's close releases its own count once its socket is closed.
      guard evict(address) else { return (.clientLimit(limits.maxConnectionsPerClient), nil) }
      entry = perClient.withLock { $0.add(address, remembered: remembered, limit: .max) }
    }
    guard let entry else { return (.clientLimit(limits.maxConnectionsPerClient), nil) }
    if open.add(1, ordering: .relaxed).newValue > limits.maxConnections {
      if evict(nil) { return (.admitted, entry) }
      open.subtract(1, ordering: .relaxed)
      release(entry, countedOpen: false)
      return (.processLimit(limits.maxConnections), nil)
    }
    return (.admitted, entry)
  }

  /// A refused connection may close lingeringly; false past the bound
  /// (then it is closed after the flush). `endRefusedLingering` follows a true.
  func beginRefusedLingering() -> Bool {
    guard refusedLingering.add(1, ordering: .relaxed).newValue <= Self.maxRefusedLingering else {
      refusedLingering.subtract(1, ordering: .relaxed)
      return false
    }
    return true
  }

  @Sendable func endRefusedLingering() { refusedLingering.subtract(1, ordering: .relaxed) }

  /// A connection admitted by `admit` closed.
  func release(client address: String, countedOpen: Bool = true) {
    guard let entry = perClient.withLock({ $0.entries[address] }) else {
      if countedOpen { open.subtract(1, ordering: .relaxed) }
      return
    }
    release(entry, countedOpen: countedOpen)
  }

  /// The same, by its entry: no look-up.
  func release(_ entry: ClientCount, countedOpen: Bool = true) {
    if countedOpen { open.subtract(1, ordering: .relaxed) }
    perClient.withLock { $0.remove(entry) }
  }
}

/// One client's open connections (`ConnectionAdmission`): its key, its
/// count and whether the table still lists it, all guarded by the
/// admission's lock. Held by the tickets of its connections and by its
/// loop's memo of the last client (`LoopState.lastClientCount`); one the
/// table dropped (at 0, past `zeroesKept`) is never counted again, and its
/// holders find the listed one by key.
final class ClientCount: @unchecked Sendable {
  let key: String
  fileprivate var open = 0
  fileprivate var listed = true
  init(key: String) { self.key = key }
}

/// One admitted connection's place in the counts, given back exactly once:
/// when its socket closes (`Connection.onClose`), or earlier when the
/// connection stops serving (a lingering close after a refusal).
/// Confined to the connection's loop.
final class AdmissionTicket: @unchecked Sendable {
  private let admission: ConnectionAdmission
  private var entry: ClientCount
  /// The listener's open-connection gauge (the operator's page).
  private let listenerOpen: SharedCount?
  private var held = true

  /// `entry`: what `admit` counted the connection under.
  init(admission: ConnectionAdmission, entry: ClientCount, listenerOpen: SharedCount? = nil) {
    self.admission = admission
    self.entry = entry
    self.listenerOpen = listenerOpen
    listenerOpen?.add(1)
  }

  /// Counts a new connection of the same listener under `entry` (which
  /// `admit` counted it in under): a ticket released by its connection's
  /// close, kept by a session that serves the loop's next connection.
  func reissue(_ entry: ClientCount) {
    precondition(!held, "reissue: a released ticket only")
    self.entry = entry
    held = true
    listenerOpen?.add(1)
  }

  func release() {
    guard held else { return }
    held = false
    admission.release(entry)
    listenerOpen?.add(-1)
  }
}

/// How expendable an open client connection is when the process is at its
/// connection limit. Lower `tier` goes first; within a tier, the longest
/// waiting (`since`, uptime nanoseconds) goes first.
struct EvictionCandidate: Comparable {
  enum Tier: Int, Comparable {
    /// Between requests on a keep-alive connection: the client loses nothing.
    case idleKeepAlive = 0
    /// Has sent part of a request head (or nothing yet): the slow ones.
    case unfinishedHead = 1
    /// A raw CONNECT tunnel silent both ways for `idleSpliceSeconds`.
    case idleSplice = 2

    static func < (lhs: Tier, rhs: Tier) -> Bool { lhs.rawValue < rhs.rawValue }
  }

  let tier: Tier
  let since: UInt64

  /// How long a raw tunnel must have been silent before it may be cut.
  static let idleSpliceSeconds = 30.0

  static func < (lhs: EvictionCandidate, rhs: EvictionCandidate) -> Bool {
    (lhs.tier, lhs.since) < (rhs.tier, rhs.since)
  }
}
