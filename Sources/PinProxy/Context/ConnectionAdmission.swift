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

  /// Open connections per client. A client whose count fell to 0 keeps its
  /// entry, up to `zeroesKept` of them (then every zero goes at once): a
  /// client connecting again and again (a connection per request) then
  /// finds its entry instead of inserting and removing it each time, and
  /// the table holds the clients with connections plus at most that many.
  private struct ClientCounts {
    var counts: [String: Int] = [:]
    var zeroes = 0
    static let zeroesKept = 64

    /// One more for `client` unless it has `limit` already; one look-up
    /// for a client the table holds.
    mutating func add(_ client: String, limit: Int) -> Bool {
      guard let index = counts.index(forKey: client) else {
        guard limit > 0 else { return false }
        counts[client] = 1
        return true
      }
      guard counts.values[index] < limit else { return false }
      if counts.values[index] == 0 { zeroes -= 1 }
      counts.values[index] += 1
      return true
    }

    /// One fewer for `client`; one look-up.
    mutating func remove(_ client: String) {
      guard let index = counts.index(forKey: client), counts.values[index] > 0 else { return }
      counts.values[index] -= 1
      guard counts.values[index] == 0 else { return }
      zeroes += 1
      if zeroes > Self.zeroesKept {
        counts = counts.filter { $0.value > 0 }
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
    let admittedForClient = perClient.withLock { $0.add(address, limit: limits.maxConnectionsPerClient) }
    if !admittedForClient {
      // The victim's close releases its own count once its socket is closed.
      guard evict(address) else { return .clientLimit(limits.maxConnectionsPerClient) }
      _ = perClient.withLock { $0.add(address, limit: .max) }
    }
    if open.add(1, ordering: .relaxed).newValue > limits.maxConnections {
      if evict(nil) { return .admitted }
      open.subtract(1, ordering: .relaxed)
      release(client: address, countedOpen: false)
      return .processLimit(limits.maxConnections)
    }
    return .admitted
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
    if countedOpen { open.subtract(1, ordering: .relaxed) }
    perClient.withLock { $0.remove(address) }
  }
}

/// One admitted connection's place in the counts, given back exactly once:
/// when its socket closes (`Connection.onClose`), or earlier when the
/// connection stops serving (a lingering close after a refusal).
/// Confined to the connection's loop.
final class AdmissionTicket: @unchecked Sendable {
  private let admission: ConnectionAdmission
  private let client: String
  /// The listener's open-connection gauge (the operator's page).
  private let listenerOpen: SharedCount?
  private var held = true

  init(admission: ConnectionAdmission, client: String, listenerOpen: SharedCount? = nil) {
    self.admission = admission
    self.client = client
    self.listenerOpen = listenerOpen
    listenerOpen?.add(1)
  }

  func release() {
    guard held else { return }
    held = false
    admission.release(client: client)
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
