import Foundation
import PinConfig
import PinEventLoop
import PinTrust
import Synchronization

/// What the data path of a running proxy shares, process-wide: the
/// configuration snapshot, the trust engine (and its fingerprint cache),
/// TLS sessions, admission and the upstream budget, the logger and
/// metrics. Each loop's own part (its pool, session registry and sock_diag
/// socket) is its `LoopState`; the tasks beside the data
/// path are `background` (`BackgroundServices`).
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
  /// Each loop's own state, by `EventLoop.index` (an index, not a
  /// dictionary keyed by the loop: nothing is hashed per connection).
  private let loopStates: [LoopState]
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
  /// The tasks that run beside the data path (pin lists, revocation,
  /// reports, issuances, served chains): nothing a request reads.
  let background: BackgroundServices

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
    loopStates = zip(group.loops, pools).map { LoopState(loop: $0, pool: $1) }
    self.group = group
    background = BackgroundServices(
      loop: group.loops[0], current: current, trustEngine: trustEngine, sessions: sessions, logger: logger,
      metrics: metrics, pools: pools)
  }

  /// Refusals on its connections are reported (`report.uris`).
  func dialer(for snapshot: RuntimeSnapshot) -> UpstreamDialer {
    UpstreamDialer(
      snapshot: snapshot, trustEngine: trustEngine, sessions: sessions, metrics: metrics,
      reporter: background.reporter, revocationFetcher: RevocationFetcher())
  }

  var isDraining: Bool { draining.load(ordering: .relaxed) }

  func recordReload(_ record: ReloadRecord) {
    reloads.withLock { list in
      list.append(record)
      if list.count > ReloadRecord.kept { list.removeFirst(list.count - ReloadRecord.kept) }
    }
  }

  /// `loop`'s own state; only ever used on that loop.
  func loopState(for loop: EventLoop) -> LoopState {
    let index = loop.index
    guard index < loopStates.count, loopStates[index].loop === loop else {
      preconditionFailure("loop outside the proxy's group")
    }
    return loopStates[index]
  }

  func registry(for loop: EventLoop) -> SessionRegistry { loopState(for: loop).registry }

  /// Installs a new snapshot. It governs every decision made after this:
  /// open sessions take it before their next request or stream (`isCurrent`),
  /// pooled upstream connections of other generations are retired, and the
  /// caches keyed by generation are emptied.
  func install(_ snapshot: RuntimeSnapshot) {
    current.withLock { $0 = snapshot }
    generation.store(snapshot.generation, ordering: .releasing)
    snapshot.pins.keep(only: Set(snapshot.pinStores.map(\.spec.id)))
    background.updater.configurationChanged()
    trustEngine.removeAll()
    sessions.removeAll()
    metrics.refusalLog.rulesChanged(snapshot.ruleExpectations)
    metrics.rules.reloaded(
      keeping: Set(snapshot.rules.map(\.name) + (snapshot.defaultRule.map { [$0.name] } ?? [])))
    logger.setQueryStrings(snapshot.configuration.logging.queryStrings)
    for state in loopStates {
      state.loop.execute {
        state.pool.retire(keeping: snapshot.generation)
        state.registry.reviewAccess(under: snapshot)
      }
    }
  }

  /// Starts the graceful shutdown: every loop's idle sessions close now.
  func beginDraining() {
    draining.store(true, ordering: .relaxed)
    for state in loopStates {
      state.loop.execute { state.registry.drainAll() }
    }
  }

  /// Whether `snapshot` is still the one in force (an atomic load).
  func isCurrent(_ snapshot: RuntimeSnapshot) -> Bool {
    generation.load(ordering: .acquiring) == snapshot.generation
  }

  /// The snapshot in force.
  var snapshot: RuntimeSnapshot { current.withLock { $0 } }

  /// The pool of `loop`; only ever used on that loop.
  func pool(for loop: EventLoop) -> UpstreamPool { loopState(for: loop).pool }
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
