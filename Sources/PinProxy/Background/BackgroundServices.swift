import PinEventLoop
import PinTrust

/// The tasks a running proxy keeps beside its data path, made with it and
/// started once it listens (`start`): the rules' dynamic pin lists, the
/// revocation refresh, pin-failure reports, the unpinned issuances
/// `pinproxy ct-hook` recorded, and the served chains `check` reads. Each
/// reads the snapshot in force when it runs (`current`), and its own
/// requests go through a dialer of its own on the first loop. Nothing here
/// is read by a request; a request's only tie to them is the reporter its
/// dialer hands refusals to.
final class BackgroundServices: Sendable {
  /// Pin-failure reports and report-only logging.
  let reporter: PinFailureReporter
  /// Keeps the rules' dynamic pin lists fresh.
  let updater: DynamicPinUpdater
  let revocationRefresher: RevocationRefresher
  /// The unpinned issuances `pinproxy ct-hook` recorded in the state directory.
  let issuances: IssuanceWatch
  /// Writes the chains rules accept to the state directory, for `check`.
  let servedChains: ServedChainRecorder

  /// `pools`: every loop's, so that a replaced pin list retires the idle
  /// connections verified under the old one everywhere.
  init(
    loop: EventLoop, current: Locked<RuntimeSnapshot>, trustEngine: TrustEngine, sessions: TLSSessionCache,
    logger: ProxyLogger, metrics: ProxyMetrics, pools: [UpstreamPool]
  ) {
    // The background dialers take the snapshot in force when each is made.
    @Sendable func dialer(reporter: (any PinFailureReporting)?) -> UpstreamDialer {
      UpstreamDialer(
        snapshot: current.withLock { $0 }, trustEngine: trustEngine, sessions: sessions, metrics: metrics,
        reporter: reporter, revocationFetcher: RevocationFetcher())
    }
    let reporter = PinFailureReporter(
      loop: loop, logger: logger, metrics: metrics, vendorID: PinFailureReporter.installationID()
    ) { dialer(reporter: nil) }
    self.reporter = reporter
    servedChains = ServedChainRecorder(activity: metrics.rules) { current.withLock { $0 } }
    issuances = IssuanceWatch(logger: logger) {
      StateDirectory.resolve(current.withLock { $0 }.configuration.stateDirectory)
    }
    revocationRefresher = RevocationRefresher(loop: loop) { dialer(reporter: reporter) }
    updater = DynamicPinUpdater(
      loop: loop, logger: logger, metrics: metrics,
      makeDialer: { dialer(reporter: reporter) },
      stores: { current.withLock { $0 }.pinStores },
      // A rule's pin list was replaced: idle connections verified under the
      // old one are closed on every loop (busy ones are not pooled again).
      listChanged: {
        let generation = current.withLock { $0 }.generation
        for pool in pools { pool.loop.execute { pool.retire(keeping: generation) } }
      })
  }

  /// Starts every task (once the proxy listens).
  func start() {
    updater.start()
    revocationRefresher.start()
    issuances.start()
    servedChains.start()
  }
}
