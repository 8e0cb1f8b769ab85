import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// Idle upstream connections of one loop, used only on that loop (`loop.queue`). Each idle
/// connection has a deadline, enforced by one sweep timer per pool; one that
/// closes or sends anything while idle is dropped.
final class UpstreamPool: UpstreamDelegate, @unchecked Sendable {
  let loop: EventLoop
  /// Idle connections per key, oldest first. A key's list stays when it
  /// empties (a keep-alive load empties and refills it constantly, and each
  /// new list is an allocation); empty lists are dropped past
  /// `maxEmptyLists` and on retirement.
  private var idle: [UpstreamKey: IdleList] = [:]

  /// One key's idle connections. A class, so that taking and putting back
  /// only read the dictionary: a dictionary value changed in place goes
  /// through nested modify coroutines, whose frames were allocated on the
  /// heap three times per keep-alive request. A connection remembers the
  /// list it was taken from, and an acquirer the list of its last target,
  /// so that a keep-alive request's take and put hash no key at all.
  final class IdleList {
    fileprivate var entries: [(connection: UpstreamConnection, deadline: UInt64)] = []
    /// No longer the pool's list for its key (retired, or dropped empty):
    /// whoever remembers it looks the key up again.
    fileprivate(set) var dropped = false
  }
  static let maxEmptyLists = 256
  /// The idle count across all loops' pools, for /metrics.
  private let idleGauge: SharedCount
  /// Whether a key's pin list version is still the one in force.
  private let pins: DynamicPinRegistry
  /// This loop's shared HTTP/2 connections.
  let http2: HTTP2UpstreamPool
  /// The policy generation in force: a connection verified under an older
  /// one (a dial that finished after a reload) is never kept for reuse.
  private var generation: UInt64 = 0
  /// Closes the connections whose idle time is up. One timer, made once and
  /// re-armed for the earliest deadline, rather than a timer and a closure
  /// per connection put back (one per request under keep-alive load).
  private lazy var sweepTimer: LoopTimer = loop.makeTimer { [weak self] in self?.sweep() }
  /// When the sweep timer fires next (uptime ns); nil while it is not armed.
  private var sweepDeadline: UInt64?
  /// The dialer of the snapshot last asked for, by its generation: a
  /// loop's new connections share it rather than each making one.
  private var dialerInForce: (generation: UInt64, dialer: UpstreamDialer)?

  /// The dialer for `snapshot`, made by `make` once per generation on this
  /// loop. Sound because a snapshot never changes and each installed one
  /// has a generation of its own. On the loop only.
  func dialer(under snapshot: RuntimeSnapshot, make: () -> UpstreamDialer) -> UpstreamDialer {
    loop.preconditionInLoop()
    if let dialerInForce, dialerInForce.generation == snapshot.generation { return dialerInForce.dialer }
    let made = make()
    dialerInForce = (snapshot.generation, made)
    return made
  }

  init(loop: EventLoop, idleGauge: SharedCount, pins: DynamicPinRegistry) {
    self.loop = loop
    self.idleGauge = idleGauge
    self.pins = pins
    http2 = HTTP2UpstreamPool(loop: loop)
  }

  /// What this loop's pool holds, for the operator's page: idle HTTP/1.1
  /// connections per key, open h2 connections per key with their streams.
  func census() -> [PoolCensus] {
    loop.preconditionInLoop()
    var rows = idle.compactMap { key, list in
      list.entries.isEmpty
        ? nil
        : PoolCensus(
          key: key.description, protocolName: WireProtocol.http1.rawValue, connections: list.entries.count,
          streamsInFlight: 0)
    }
    rows += http2.census()
    return rows
  }

  /// Closes the idle connection that waited longest, to make room under the
  /// upstream socket limit; false when none is idle.
  func closeOneIdle() -> Bool {
    loop.preconditionInLoop()
    guard let list = idle.first(where: { !$0.value.entries.isEmpty })?.value else { return false }
    let (connection, _) = list.entries.removeFirst()
    idleGauge.add(-1)
    connection.close()
    return true
  }

  /// The most recently used idle connection for `key`.
  ///
  /// An idle connection stays in the loop's readiness set, and anything it
  /// reads (bytes, a FIN, a reset) ends its use, so the kernel is not asked
  /// again here (nginx's upstream keepalive does the same): a request
  /// without a body that meets an idle close raced with it is sent once more
  /// on a new connection (`mayRetryAfterClose`). `bodyFollows`: a request
  /// body cannot be sent twice, so such a request takes a connection only
  /// after the kernel says nothing arrived on it since the last readiness
  /// batch (`MSG_PEEK`, one syscall).
  ///
  /// `admit` is asked first, once, and only when one is idle for the key
  /// (the client's share of the upstream budget): `refused` when it says
  /// no; `none` with `admitted` true when it said yes and none of the idle
  /// ones was still usable. One look-up of the key in all.
  func take(_ key: UpstreamKey, bodyFollows: Bool, admit: () -> Bool) -> Taken {
    take(from: idleList(for: key), bodyFollows: bodyFollows, admit: admit)
  }

  /// The same from the key's list as `idleList(for:)` gave it (nil: none yet).
  func take(from list: IdleList?, bodyFollows: Bool, admit: () -> Bool) -> Taken {
    loop.preconditionInLoop()
    guard let list, !list.dropped, !list.entries.isEmpty else { return .none(admitted: false) }
    guard admit() else { return .refused }
    return take(from: list, bodyFollows: bodyFollows).map(Taken.connection) ?? .none(admitted: true)
  }

  /// The key's list of idle connections, while the pool has one: to be
  /// remembered and handed back to `take(from:)` while not `dropped`.
  func idleList(for key: UpstreamKey) -> IdleList? {
    loop.preconditionInLoop()
    return idle[key]
  }

  enum Taken {
    case connection(UpstreamConnection)
    case refused
    case none(admitted: Bool)
  }

  private func take(from list: IdleList, bodyFollows: Bool) -> UpstreamConnection? {
    while let (connection, _) = list.entries.popLast() {
      idleGauge.add(-1)
      if connection.isReusable && (!bodyFollows || connection.hasNoUnreadInput) {
        connection.markReused()
        connection.idleList = list
        return connection
      }
      connection.close()
    }
    return nil
  }

  /// Keeps a connection for reuse, or closes it when the pool for its key is
  /// full, or when it was verified under a pin list that has since been replaced.
  func put(_ connection: UpstreamConnection, idleTimeout: Double, maxIdle: Int) {
    loop.preconditionInLoop()
    // The list it was taken from, while still the key's; else looked up.
    let existing = connection.idleList.flatMap { $0.dropped ? nil : $0 } ?? idle[connection.key]
    guard connection.isReusable, (existing?.entries.count ?? 0) < maxIdle,
      connection.key.policy.generation >= generation, pins.isCurrent(connection.key.policy.pinList)
    else {
      return connection.close()
    }
    connection.delegate = self
    // Read while idle (the session may have paused it for back-pressure):
    // anything an idle connection sends ends its use.
    connection.resumeReading()
    let deadline = EventLoop.deadline(after: idleTimeout, now: loop.now)
    if sweepDeadline.map({ deadline < $0 }) ?? true { arm(at: deadline, after: idleTimeout) }
    let list: IdleList
    if let existing {
      list = existing
    } else {
      if idle.count >= Self.maxEmptyLists {
        idle = idle.filter { _, list in
          if list.entries.isEmpty { list.dropped = true }
          return !list.dropped
        }
      }
      list = IdleList()
      idle[connection.key] = list
    }
    connection.idleList = list
    list.entries.append((connection, deadline))
    idleGauge.add(1)
  }

  /// Closes idle connections whose policy generation is not `generation`,
  /// or whose pin list was replaced.
  func retire(keeping generation: UInt64) {
    loop.preconditionInLoop()
    self.generation = max(self.generation, generation)
    http2.retire(keeping: generation) { [pins] in pins.isCurrent($0.policy.pinList) }
    for (key, list) in idle where key.policy.generation != generation || !pins.isCurrent(key.policy.pinList) {
      for (connection, _) in list.entries {
        connection.close()
        idleGauge.add(-1)
      }
      // Emptied, not only dropped: a connection remembers its list, and a
      // list still holding it would hold it in turn.
      list.entries = []
      list.dropped = true
      idle[key] = nil
    }
  }

  private func remove(_ connection: UpstreamConnection) {
    guard let list = idle[connection.key],
      let index = list.entries.firstIndex(where: { $0.connection === connection })
    else { return }
    idleGauge.add(-1)
    list.entries.remove(at: index)
  }

  private func arm(at deadline: UInt64, after seconds: Double) {
    sweepDeadline = deadline
    sweepTimer.schedule(after: seconds)
  }

  /// Closes every connection past its deadline and re-arms for the earliest
  /// one left. Every entry is looked at: a reload may have shortened the idle
  /// timeout, so a list's deadlines need not grow with its order.
  private func sweep() {
    loop.preconditionInLoop()
    sweepDeadline = nil
    let now = DispatchTime.now().uptimeNanoseconds
    var expired: [UpstreamConnection] = []
    var earliest: UInt64?
    for list in idle.values {
      list.entries.removeAll { entry in
        if entry.deadline <= now {
          expired.append(entry.connection)
          return true
        }
        earliest = min(earliest ?? entry.deadline, entry.deadline)
        return false
      }
    }
    idleGauge.add(-expired.count)
    for connection in expired { connection.close() }
    if let earliest { arm(at: earliest, after: Double(earliest - now) / 1e9) }
  }

  /// The idle connection that `link` is. The pool is the delegate of its
  /// idle connections only, so a call from anything else finds none.
  private func idleConnection(_ link: any UpstreamLink) -> UpstreamConnection? {
    idle[link.key]?.entries.first { $0.connection === link }?.connection
  }

  // An idle connection must stay silent; anything from it ends its use.
  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent]) {
    loop.preconditionInLoop()
    guard let connection = idleConnection(upstream) else { return upstream.close() }
    drop(connection)
  }
  func upstreamDidDrain(_ upstream: any UpstreamLink) {}
  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    loop.preconditionInLoop()
    if let connection = idleConnection(upstream) { remove(connection) }
  }

  private func drop(_ upstream: UpstreamConnection) {
    remove(upstream)
    upstream.close()
  }
}

/// One key's connections in a loop's pool (the operator's page).
struct PoolCensus: Sendable {
  let key: String
  /// `http/1.1` (idle pooled connections) or `h2` (open connections).
  let protocolName: String
  let connections: Int
  let streamsInFlight: Int
}
