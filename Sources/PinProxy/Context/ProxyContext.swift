import Foundation
import PinConfig
import PinEventLoop
import PinTrust
import Synchronization

/// What every session of a running proxy shares: the configuration snapshot,
/// the trust engine (and its fingerprint cache), TLS sessions, one upstream
/// pool per loop, the logger and the connection count.
final class ProxyContext: Sendable {
  private let current: Locked<RuntimeSnapshot>
  let trustEngine: TrustEngine
  let sessions = TLSSessionCache()
  let logger: ProxyLogger
  let metrics: ProxyMetrics
  /// The listeners as bound at start (a reload changes their settings, not
  /// their addresses).
  let boundListeners: [ListenerConfig]
  /// The last reloads, newest last (at most `ReloadRecord.kept`), for the page.
  let reloads = Locked<[ReloadRecord]>([])
  /// Runs a reload the way SIGHUP does (set by `pinproxy run`; nil: the
  /// embedded default has no file to reload) and answers once the new
  /// configuration is in force or was refused. `POST /reload` calls it.
  let reloadRequester = Locked<(@Sendable (@escaping @Sendable (ReloadOutcome) -> Void) -> Void)?>(nil)
  /// Per loop, by `EventLoop.index` (an index, not a dictionary keyed by
  /// the loop: a new connection looked both up, two hashes each).
  private let pools: [UpstreamPool]
  private let registries: [SessionRegistry]
  let group: EventLoopGroup
  /// Connection counts and limits (process-wide and per client address).
  let admission = ConnectionAdmission()
  /// Upstream sockets and buffered response bytes clients may cause.
  let budget: UpstreamBudget
  /// The generation of `snapshot`, readable without the lock: sessions
  /// compare it before each decision and take the new snapshot when it moved.
  let generation: Atomic<UInt64>
  /// Set once on SIGTERM/SIGINT: responses say `Connection: close`, idle
  /// connections are closed, /healthz answers 503.
  let draining = Atomic<Bool>(false)
  /// Rate-limits the log line of connections refused for their address.
  let refusedClients = RefusedClientLog()
  /// Pin-failure reports and report-only logging.
  let reporter: PinFailureReporter
  /// Keeps the rules' dynamic pin lists fresh.
  let updater: DynamicPinUpdater
  let revocationRefresher: RevocationRefresher
  /// The unpinned issuances `pinproxy ct-hook` recorded in the state directory.
  let issuances: IssuanceWatch
  /// Writes the chains rules accept to the state directory, for `check`.
  let servedChains: ServedChainRecorder
  /// Each loop's sock_diag socket (nil where the kernel offers none), by
  /// loop index: who owns the other end of a connection from this host.
  let sockDiag: [SockDiagSocket?]

  init(snapshot: RuntimeSnapshot, group: EventLoopGroup, logger: ProxyLogger) {
    current = Locked(snapshot)
    generation = Atomic(snapshot.generation)
    budget = UpstreamBudget(limits: snapshot.limits)
    trustEngine = TrustEngine(partitions: group.loops.count)
    self.logger = logger
    boundListeners = snapshot.configuration.listeners
    let metrics = ProxyMetrics(
      listeners: snapshot.configuration.listeners.map(\.name), loops: group.loops.count,
      localProgramsShown: snapshot.configuration.admin != nil)
    self.metrics = metrics
    metrics.refusalLog.rulesChanged(snapshot.ruleExpectations)
    logger.setQueryStrings(snapshot.configuration.logging.queryStrings)
    precondition(group.loops.indices.allSatisfy { group.loops[$0].index == $0 }, "loops indexed in order")
    let pools = group.loops.map {
      UpstreamPool(loop: $0, idleGauge: metrics.idlePooledConnections, pins: snapshot.pins)
    }
    self.pools = pools
    registries = group.loops.map { SessionRegistry(loop: $0) }
    self.group = group
    sockDiag = group.loops.map { _ in SockDiagSocket() }
    // The daemon's own requests run on the first loop.
    let loop = group.loops[0]
    let (current, engine, sessions) = (current, trustEngine, sessions)
    let allPools = pools
    let reporter = PinFailureReporter(
      loop: loop, logger: logger, metrics: metrics, vendorID: PinFailureReporter.installationID()
    ) {
      UpstreamDialer(
        snapshot: current.withLock { $0 }, trustEngine: engine, sessions: sessions, metrics: metrics,
        reporter: nil, revocationFetcher: RevocationFetcher())
    }
    self.reporter = reporter
    servedChains = ServedChainRecorder(activity: metrics.rules) { current.withLock { $0 } }
    issuances = IssuanceWatch(logger: logger) {
      StateDirectory.resolve(current.withLock { $0 }.configuration.stateDirectory)
    }
    revocationRefresher = RevocationRefresher(loop: loop) {
      UpstreamDialer(
        snapshot: current.withLock { $0 }, trustEngine: engine, sessions: sessions, metrics: metrics,
        reporter: reporter, revocationFetcher: RevocationFetcher())
    }
    updater = DynamicPinUpdater(
      loop: loop, logger: logger, metrics: metrics,
      makeDialer: {
        UpstreamDialer(
          snapshot: current.withLock { $0 }, trustEngine: engine, sessions: sessions, metrics: metrics,
          reporter: reporter, revocationFetcher: RevocationFetcher())
      },
      stores: { current.withLock { $0 }.pinStores },
      // A rule's pin list was replaced: idle connections verified under the
      // old one are closed on every loop (busy ones are not pooled again).
      listChanged: {
        let generation = current.withLock { $0 }.generation
        for pool in allPools { pool.loop.execute { pool.retire(keeping: generation) } }
      })
  }

  /// Refusals on its connections are reported (`report.uris`).
  func dialer(for snapshot: RuntimeSnapshot) -> UpstreamDialer {
    UpstreamDialer(
      snapshot: snapshot, trustEngine: trustEngine, sessions: sessions, metrics: metrics, reporter: reporter,
      revocationFetcher: RevocationFetcher())
  }

  var isDraining: Bool { draining.load(ordering: .relaxed) }

  func recordReload(_ record: ReloadRecord) {
    reloads.withLock { list in
      list.append(record)
      if list.count > ReloadRecord.kept { list.removeFirst(list.count - ReloadRecord.kept) }
    }
  }

  func registry(for loop: EventLoop) -> SessionRegistry {
    let index = loop.index
    guard index < registries.count, registries[index].loop === loop else {
      preconditionFailure("loop outside the proxy's group")
    }
    return registries[index]
  }

  /// Installs a new snapshot. It governs every decision made after this:
  /// open sessions take it before their next request or stream (`isCurrent`),
  /// pooled upstream connections of other generations are retired, and the
  /// caches keyed by generation are emptied.
  func install(_ snapshot: RuntimeSnapshot) {
    current.withLock { $0 = snapshot }
    generation.store(snapshot.generation, ordering: .releasing)
    snapshot.pins.keep(only: Set(snapshot.pinStores.map(\.spec.id)))
    updater.configurationChanged()
    trustEngine.removeAll()
    sessions.removeAll()
    metrics.refusalLog.rulesChanged(snapshot.ruleExpectations)
    metrics.rules.reloaded(
      keeping: Set(snapshot.rules.map(\.name) + (snapshot.defaultRule.map { [$0.name] } ?? [])))
    logger.setQueryStrings(snapshot.configuration.logging.queryStrings)
    for loop in group.loops {
      let (pool, registry) = (self.pool(for: loop), self.registry(for: loop))
      loop.execute {
        pool.retire(keeping: snapshot.generation)
        registry.reviewAccess(under: snapshot)
      }
    }
  }

  /// Starts the graceful shutdown: every loop's idle sessions close now.
  func beginDraining() {
    draining.store(true, ordering: .relaxed)
    for loop in group.loops {
      let registry = self.registry(for: loop)
      loop.execute { registry.drainAll() }
    }
  }

  /// Whether `snapshot` is still the one in force (an atomic load).
  func isCurrent(_ snapshot: RuntimeSnapshot) -> Bool {
    generation.load(ordering: .acquiring) == snapshot.generation
  }

  /// The snapshot in force.
  var snapshot: RuntimeSnapshot { current.withLock { $0 } }

  /// The pool of `loop`; only ever used on that loop.
  func pool(for loop: EventLoop) -> UpstreamPool {
    let index = loop.index
    guard index < pools.count, pools[index].loop === loop else {
      preconditionFailure("loop outside the proxy's group")
    }
    return pools[index]
  }
}

/// One reload, as the operator's page lists it.
struct ReloadRecord: Sendable, Codable {
  static let kept = 10
  let time: Date
  /// `ok` or `failed`.
  let result: String
  /// The generation it installed, or (failed) the one it kept.
  let generation: UInt64
  /// The first errors, one per line (failed reloads).
  let error: String?
  /// What the reload said beside its result (listeners left unchanged,
  /// pins expiring or waived, …), one per line.
  var warnings: [String] = []
}

/// How a reload ended, for whoever asked for it (`POST /reload`, the log).
public struct ReloadOutcome: Sendable {
  public let ok: Bool
  /// The generation installed, or (failed) the one kept.
  public let generation: UInt64
  public let errors: [String]
  public let warnings: [String]

  public init(ok: Bool, generation: UInt64, errors: [String], warnings: [String]) {
    self.ok = ok
    self.generation = generation
    self.errors = errors
    self.warnings = warnings
  }

  /// `ok generation N` or `failed: generation N kept`, then a line per
  /// error and warning: what `pinproxy reload` prints.
  public var text: String {
    var lines = [ok ? "ok generation \(generation)" : "failed: generation \(generation) kept"]
    lines += errors.map { "error: \($0)" } + warnings.map { "warning: \($0)" }
    return lines.joined(separator: "\n") + "\n"
  }
}
