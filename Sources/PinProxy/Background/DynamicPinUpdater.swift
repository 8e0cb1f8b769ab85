import Foundation
import PinEventLoop
import PinTrust

/// Keeps every rule's list fresh: fetches each one when it is due (its
/// schedule, or the retry backoff after a failure), installs verified
/// updates, and tells the proxy to retire connections verified under a
/// replaced list.
///
/// Off the event loops' hot path: the schedule and the file writes run on
/// its own serial queue (`queue`); only the fetch's socket work runs on a
/// loop, as non-blocking I/O like any upstream request. One Dispatch timer,
/// re-armed to the earliest due store (at most a minute ahead, so stores
/// added by a reload are seen).
final class DynamicPinUpdater: @unchecked Sendable {
  private let timer = BackgroundTimer(label: "pinproxy.dynamic-pins")
  private var queue: DispatchQueue { timer.queue }
  private let loop: EventLoop
  private let logger: ProxyLogger
  private let metrics: ProxyMetrics
  private let makeDialer: @Sendable () -> UpstreamDialer
  private let stores: @Sendable () -> [DynamicPinStore]
  private let listChanged: @Sendable () -> Void
  /// Stores with a fetch under way (on `queue`).
  private var fetching: Set<String> = []

  init(
    loop: EventLoop, logger: ProxyLogger, metrics: ProxyMetrics,
    makeDialer: @escaping @Sendable () -> UpstreamDialer,
    stores: @escaping @Sendable () -> [DynamicPinStore], listChanged: @escaping @Sendable () -> Void
  ) {
    self.loop = loop
    self.logger = logger
    self.metrics = metrics
    self.makeDialer = makeDialer
    self.stores = stores
    self.listChanged = listChanged
  }

  /// Arms the timer; called once, by the server once it listens.
  func start() {
    timer.start(after: 0) { [weak self] in self?.tick() }
  }

  /// After a reload (SIGHUP): picks up lists another process stored
  /// (`pinproxy pins update`) and looks at the schedule again at once.
  func configurationChanged() {
    queue.async { [self] in
      var changed = false
      for store in stores() {
        let loaded = store.reloadIfNewer(at: Date()) { warning in
          logger.log(
            .warning, "dynamic-pins-store-ignored", ["rule": store.spec.ruleDomain, "reason": warning])
        }
        if loaded {
          changed = true
          let state = store.snapshot
          logger.log(
            .info, "dynamic-pins-updated",
            [
              "rule": store.spec.ruleDomain, "source": "stored", "entries": String(state.list.entries.count),
              "version": String(state.version),
            ])
        }
      }
      if changed { listChanged() }
      tick()
    }
  }

  private func tick() {
    dispatchPrecondition(condition: .onQueue(queue))
    let now = Date()
    var earliest = now.addingTimeInterval(60)
    for store in stores() {
      let due = store.snapshot.nextUpdate
      if due <= now {
        if !fetching.contains(store.spec.id) { fetch(store) }
      } else {
        earliest = min(earliest, due)
      }
    }
    timer.schedule(after: max(0.05, earliest.timeIntervalSince(now)))
  }

  private func fetch(_ store: DynamicPinStore) {
    fetching.insert(store.spec.id)
    let started = DispatchTime.now().uptimeNanoseconds
    PinListFetch.run(store, dialer: makeDialer(), on: loop) { [self] result in
      // Off the loops' cells: fetches are rare and finish on any thread.
      metrics.pinListFetchDuration.observeShared(
        (try? result.get()) == nil ? 1 : 0, nanoseconds: DispatchTime.nanoseconds(since: started))
      queue.async { [self] in
        fetching.remove(store.spec.id)
        finish(store, result)
        tick()
      }
    }
  }

  private func finish(_ store: DynamicPinStore, _ result: Result<PinListUpdate.Outcome, PinListFetch.Failure>)
  {
    let rule = store.spec.ruleDomain
    let now = Date()
    switch result {
    case .failure(let failure):
      metrics.pinListFailures.increment([rule, failure.reason])
      let retry = store.recordFailure(failure.description, at: now)
      logger.log(
        .warning, "dynamic-pins-update-failed",
        [
          "rule": rule, "url": store.spec.url.description, "reason": failure.reason,
          "detail": failure.description,
          "kept_entries": String(store.snapshot.list.entries.count),
          "retry_in_s": String(Int(retry.timeIntervalSince(now).rounded())),
        ])
    case .success(let outcome):
      let (previous, writeError) = store.install(outcome.list, at: now)
      let (added, removed) = PinListFetch.changes(from: previous, to: outcome.list)
      let state = store.snapshot
      logger.log(
        .info, "dynamic-pins-updated",
        [
          "rule": rule, "source": "fetched", "entries": String(outcome.list.entries.count),
          "added": String(added.count), "removed": String(removed.count), "version": String(state.version),
          "next_update_in_s": String(Int(state.nextUpdate.timeIntervalSince(now).rounded())),
        ])
      for name in outcome.unexpectedNames {
        logger.log(
          .warning, "dynamic-pins-unexpected-name",
          ["rule": rule, "name": name, "note": "not in expectedCommonNames; such a leaf is refused anyway"])
      }
      if let writeError {
        logger.log(
          .error, "dynamic-pins-store-failed",
          ["rule": rule, "reason": writeError, "note": "the list is used, but a restart will not have it"])
      }
      if previous.entries != outcome.list.entries { listChanged() }
    }
  }
}
