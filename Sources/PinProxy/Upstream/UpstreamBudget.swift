import Foundation
import PinConfig
import PinTrust
import Synchronization

/// What client connections may cause upstream, process-wide: upstream
/// sockets (in total, and in use by one client address), and response bytes
/// buffered for HTTP/2 clients that read slowly or not at all.
///
/// Client connections are bounded by `ConnectionAdmission`, but one client
/// connection can ask for many upstream sockets (an h2 client opens a
/// stream per request, and each stream to an HTTP/1.1 origin needs a
/// connection of its own). Without a budget one client could spend every
/// descriptor of the process and stop it accepting anyone else.
/// The socket limits follow the descriptor limit (`RLIMIT_NOFILE`), so
/// that client connections up to `limits.maxConnections` always keep
/// their descriptors:
///
///     total      = max(16, nofile − min(maxConnections, nofile / 2) − 64)
///     per client = max(4, min(total / 4, maxConnectionsPerClient))
///
/// Past a limit the newest work is refused (`over-capacity`, 503); nothing
/// already running is cut.
///
/// The per-address cap is held against the connections using it, not
/// against a newcomer: a client connection that holds no upstream socket
/// gets one whenever the total has room, even when its address is at its
/// cap (every connection has a minimum share of one exchange). On a local
/// daemon every client is 127.0.0.1, so otherwise one program holding its
/// address's sockets with slow streams would lock out every other program
/// on the host while the process had sockets to spare. Only a connection
/// that already holds one is refused at the cap. Connections themselves are
/// bounded by admission (`maxConnectionsPerClient`).
final class UpstreamBudget: Sendable {
  let socketLimit: Int
  let perClientLimit: Int
  /// Response bytes all HTTP/2 client connections together may hold for
  /// readers that do not keep up; past it, every slow connection above
  /// `DownstreamHTTP2Session.slowConnectionFloor` pauses its upstreams.
  static let bufferedBytesLimit = 64 << 20
  private let sockets = Locked(Counts())
  let bufferedBytes = Atomic<Int>(0)

  private struct Counts {
    /// This budget among all made (tests make several): an entry another
    /// budget's key remembers is never taken for one of this table's.
    let table = UpstreamBudget.tableIDs.add(1, ordering: .relaxed).newValue
    var total = 0
    var perClient: [BudgetClient: ClientCounts] = [:]
    /// Entries whose count fell to 0 are kept, up to `idleKept` of them:
    /// a keep-alive client charges and releases a pooled socket on every
    /// request, and removing and re-adding its entry each time was most of
    /// that work. Past the bound every idle entry goes at once, so the table
    /// holds the clients with sockets plus at most `idleKept` others.
    var idleClients = 0
    static let idleKept = 64

    /// Adds `delta` for `connection` of `client`: one look-up, and the
    /// entry changed where it is (an object: a dictionary's in-place
    /// `modify` of a value this size allocates its coroutine frame).
    mutating func add(_ client: BudgetClient, _ connection: UInt64, _ delta: Int) {
      guard let counts = entry(client, creating: delta > 0) else { return }
      switch counts.add(connection, delta) {
      case .idle:
        idleClients += 1
        if idleClients > Self.idleKept {
          perClient = perClient.filter { _, counts in
            counts.swept = counts.total <= 0
            return !counts.swept
          }
          idleClients = 0
        }
      case .busyAgain: idleClients -= 1
      case .unchanged: break
      }
    }

    /// `client`'s entry: the one its key last found while that is still in
    /// the table (no look-up: a keep-alive request charges and releases
    /// twice), else looked up and remembered; made when `creating`.
    mutating func entry(_ client: BudgetClient, creating: Bool) -> ClientCounts? {
      if let remembered = client.entry.counts, remembered.table == table, !remembered.swept {
        return remembered
      }
      if let existing = perClient[client] {
        client.entry.counts = existing
        return existing
      }
      guard creating else { return nil }
      let made = ClientCounts(table: table)
      perClient[client] = made
      client.entry.counts = made
      return made
    }
  }

  /// One address's sockets, and which of its connections hold them. Most
  /// addresses have one connection holding sockets at a time (a keep-alive
  /// client): it is kept in a slot of its own, and the table is for others.
  /// Changed only under the budget's lock.
  final class ClientCounts {
    var total = 0
    /// Taken out of the table (at zero, past `idleKept`): a key that
    /// remembered it looks it up again.
    var swept = false
    /// The table it is in (`Counts.table`).
    let table: UInt64
    var sole: UInt64 = 0
    var soleHeld = 0
    var others: [UInt64: Int] = [:]
    /// The count fell to 0 (the entry is idle), or rose from it again.
    private var idle = false

    init(table: UInt64) { self.table = table }

    enum Change { case idle, busyAgain, unchanged }

    func held(by connection: UInt64) -> Int {
      if connection == sole && soleHeld > 0 { return soleHeld }
      return others.isEmpty ? 0 : others[connection, default: 0]
    }

    /// Whether `connection` may take one more: below the cap, or holding
    /// none yet (0 names no connection: the cap alone decides).
    func allows(_ connection: UInt64, cap: Int) -> Bool {
      total < cap || (connection != 0 && held(by: connection) == 0)
    }

    func add(_ connection: UInt64, _ delta: Int) -> Change {
      total += delta
      if connection == 0 {
        // No connection named: the address's total alone.
      } else if connection == sole && soleHeld > 0 {
        soleHeld += delta
      } else {
        if let held = others.isEmpty ? nil : others[connection] {
          others[connection] = held + delta > 0 ? held + delta : nil
        } else if delta > 0 && soleHeld <= 0 {
          (sole, soleHeld) = (connection, delta)
        } else if delta > 0 {
          others[connection] = delta
        }
      }
      if total <= 0 && !idle {
        idle = true
        return .idle
      }
      if total > 0 && idle {
        idle = false
        return .busyAgain
      }
      return .unchanged
    }
  }

  private static let connectionIDs = Atomic<UInt64>(0)
  fileprivate static let tableIDs = Atomic<UInt64>(0)

  /// A new client connection's identity in the budget (never 0).
  static func connectionID() -> UInt64 { connectionIDs.add(1, ordering: .relaxed).newValue }

  init(limits: LimitsConfig, descriptorLimit: Int = UpstreamBudget.descriptorLimit()) {
    let clients = min(limits.maxConnections, descriptorLimit / 2)
    socketLimit = max(16, descriptorLimit - clients - 64)
    perClientLimit = max(4, min(socketLimit / 4, limits.maxConnectionsPerClient))
  }

  /// The process's soft descriptor limit.
  static func descriptorLimit() -> Int {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
    return limit.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: limit.rlim_cur)
  }

  /// A new upstream socket for `client` (an admission key, see
  /// `ClientKey`); nil past either limit.
  /// `connection`: the client connection asking (`connectionID`).
  func chargeSocket(client: BudgetClient, connection: UInt64 = 0) -> UpstreamCharge? {
    let granted = sockets.withLock { counts in
      guard counts.total < socketLimit,
        counts.entry(client, creating: false)?.allows(connection, cap: perClientLimit) ?? true
      else { return false }
      counts.total += 1
      counts.add(client, connection, 1)
      return true
    }
    return granted ? UpstreamCharge(budget: self, client: client, connection: connection) : nil
  }

  /// An open idle socket taken from the pool by `client`: it counts in
  /// the total already; false when the client is at its own limit.
  func chargeClient(_ client: BudgetClient, connection: UInt64 = 0) -> Bool {
    sockets.withLock { counts in
      guard counts.entry(client, creating: false)?.allows(connection, cap: perClientLimit) ?? true else {
        return false
      }
      counts.add(client, connection, 1)
      return true
    }
  }

  /// Gives back a `chargeClient` that found no idle socket after all.
  func releaseClient(_ client: BudgetClient, connection: UInt64 = 0) {
    release(client: client, connection: connection, socket: false)
  }

  fileprivate func release(client: BudgetClient?, connection: UInt64, socket: Bool) {
    sockets.withLock { counts in
      if socket { counts.total -= 1 }
      guard let client else { return }
      counts.add(client, connection, -1)
    }
  }

  var openSockets: Int { sockets.withLock { $0.total } }

  func sockets(of client: BudgetClient) -> Int { sockets.withLock { $0.perClient[client]?.total ?? 0 } }

  /// The refusal past a socket limit.
  func refusal(client: BudgetClient) -> ProxyFailure {
    ProxyFailure(
      status: 503, code: .overCapacity,
      reason:
        "too many upstream connections (\(perClientLimit) per client address beyond one per client"
        + " connection, \(socketLimit) in all)")
  }
}

/// One upstream socket's place in the budget: its share of the total until
/// the socket closes, and its client's share while an exchange of that
/// client uses it. Released exactly once each, at the latest in `deinit`.
///
/// Confined to the loop of the socket it stands for.
final class UpstreamCharge: @unchecked Sendable {
  private let budget: UpstreamBudget
  private var client: BudgetClient?
  private var connection: UInt64
  private var socketHeld = true

  fileprivate init(budget: UpstreamBudget, client: BudgetClient, connection: UInt64) {
    self.budget = budget
    self.client = client
    self.connection = connection
  }

  /// The socket went idle (pooled, or shared by HTTP/2 streams of any client).
  func releaseClient() {
    guard let client else { return }
    self.client = nil
    budget.release(client: client, connection: connection, socket: false)
  }

  /// `client`'s `connection` takes the idle socket again (already charged
  /// by `chargeClient`).
  func assign(to client: BudgetClient, connection: UInt64 = 0) {
    releaseClient()
    self.client = client
    self.connection = connection
  }

  /// The socket closed.
  func releaseAll() {
    guard socketHeld else { return }
    socketHeld = false
    budget.release(client: client, connection: connection, socket: true)
    client = nil
  }

  deinit { releaseAll() }
}

/// A client's admission key (`ClientKey`) as the budget counts it: hashed
/// once, where a session's acquirer is made, so that charging and releasing
/// a pooled socket — twice per keep-alive request — hashes one word, not
/// the key's text. An immutable object, not a value: a charge's copy of it
/// (twice per keep-alive request) is one reference, not the key's storage
/// and the entry's.
final class BudgetClient: Hashable, Sendable, ExpressibleByStringInterpolation {
  let key: String
  private let hash: Int
  /// The budget's entry for this key as last found, shared by the copies
  /// of this value (a session's acquirer and the charges it hands out).
  let entry = Remembered()

  /// Read and written only under the budget's lock.
  final class Remembered: @unchecked Sendable {
    fileprivate var counts: UpstreamBudget.ClientCounts?
  }

  init(_ key: String) {
    self.key = key
    var hasher = Hasher()
    hasher.combine(key)
    hash = hasher.finalize()
  }

  convenience init(stringLiteral key: String) { self.init(key) }
  convenience init(stringInterpolation: DefaultStringInterpolation) {
    self.init(String(stringInterpolation: stringInterpolation))
  }

  static func == (left: BudgetClient, right: BudgetClient) -> Bool {
    left.hash == right.hash && left.key == right.key
  }

  func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}
