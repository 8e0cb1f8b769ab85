import Dispatch
import Foundation
import PinConfig
import PinTrust
import Synchronization

/// Per-listener totals sampled every few seconds, so that the page can show
/// rates over the last minute without keeping a series per second. At most
/// `kept` samples; the sampling timer runs on its own queue and only reads
/// counters.
final class RateSampler: Sendable {
  struct Sample {
    let time: UInt64
    let requests: [UInt64]
    let refusals: [Int]
  }
  static let interval = 5.0
  static let kept = 13
  private let samples = Locked([Sample]())
  private let metrics: ProxyMetrics
  /// Set up once in `init`, then only resumed and cancelled.
  private nonisolated(unsafe) let timer: DispatchSourceTimer

  /// The timer is resumed here, unscheduled, so that a sampler freed before
  /// `start` (an admin listener that failed to bind) never releases a
  /// suspended source, which Dispatch forbids.
  init(metrics: ProxyMetrics) {
    self.metrics = metrics
    timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "pinproxy.rates"))
    timer.setEventHandler { [weak self] in self?.sample() }
    timer.resume()
  }

  /// Starts sampling (once; the sampler lives as long as the admin listener).
  func start() {
    timer.schedule(deadline: .now(), repeating: RateSampler.interval)
  }

  deinit { timer.cancel() }

  func current() -> Sample {
    let counts = metrics.requestCounts()
    return Sample(
      time: DispatchTime.now().uptimeNanoseconds,
      requests: metrics.listenerNames.map { name in
        counts.filter { $0.listener == name }.reduce(0) { $0 + $1.count }
      }, refusals: metrics.listenerRefusals.map(\.value))
  }

  private func sample() {
    let sample = current()
    samples.withLock { samples in
      samples.append(sample)
      if samples.count > RateSampler.kept { samples.removeFirst(samples.count - RateSampler.kept) }
    }
  }

  /// Per listener (requests/s, refusals/s) between the oldest sample kept
  /// and `now`; nil when no sample is at least a second old.
  func rates(now: Sample) -> [(requests: Double, refusals: Double)]? {
    guard let oldest = samples.withLock({ $0.first }), now.time > oldest.time + 1_000_000_000 else {
      return nil
    }
    let seconds = Double(now.time - oldest.time) / 1e9
    return now.requests.indices.map { index in
      (
        Double(now.requests[index] &- oldest.requests[index]) / seconds,
        Double(now.refusals[index] - oldest.refusals[index]) / seconds
      )
    }
  }
}

extension OperatorStatus {
  /// The status of the running proxy. `pools` is each loop's census,
  /// gathered on the loops (`AdminSession`).
  static func gather(
    _ context: ProxyContext, pools: [PoolCensus], rates: RateSampler?, now: Date = Date()
  ) -> OperatorStatus {
    let snapshot = context.snapshot
    let metrics = context.metrics
    let sample = rates?.current()
    let perSecond = sample.flatMap { rates?.rates(now: $0) }
    let listeners = context.boundListeners.map { listener in
      let slot = metrics.listenerNames.firstIndex(of: listener.name)
      return ListenerRow(
        name: listener.name, address: listener.address.description, mode: listener.mode.rawValue,
        refusalDetail: snapshot.refusalDetail(for: listener).rawValue,
        connections: slot.map { metrics.listenerConnections[$0].value } ?? 0,
        requests: slot.flatMap { sample?.requests[$0] } ?? 0,
        refusals: slot.map { metrics.listenerRefusals[$0].value } ?? 0,
        requestsPerSecond: slot.flatMap { perSecond?[$0].requests },
        refusalsPerSecond: slot.flatMap { perSecond?[$0].refusals })
    }
    var warnings: [String] = []
    let rules = snapshot.rules.map { rule -> RuleRow in
      let row = RuleRow(rule, activity: metrics.rules, now: now)
      warnings += (row.health?.warnings ?? []).map { "\(rule.name): \($0)" }
      return row
    }
    for (rule, issuances) in snapshot.unpinnedIssuances(context.background.issuances.sightings, at: now)
      .sorted(by: {
        $0.key < $1.key
      })
    {
      warnings += issuances.map { "\(rule): \(UnpinnedIssuance.warning($0))" }
    }
    var merged: [String: PoolRow] = [:]
    for census in pools {
      let id = census.key + " " + census.protocolName
      var row =
        merged[id]
        ?? PoolRow(key: census.key, protocol: census.protocolName, connections: 0, streamsInFlight: 0)
      row.connections += census.connections
      row.streamsInFlight += census.streamsInFlight
      merged[id] = row
    }
    return OperatorStatus(
      version: ProxyVersion.current, time: now, startedAt: metrics.startTime, generation: snapshot.generation,
      draining: context.isDraining, listeners: listeners, rules: rules,
      refusals: metrics.refusalLog.recent().map(RefusalRow.init),
      upstream: UpstreamRow(
        socketsOpen: context.budget.openSockets, socketLimit: context.budget.socketLimit,
        http2StreamsInFlight: metrics.http2StreamsInFlight.value,
        pools: merged.values.sorted { ($0.key, $0.protocol) < ($1.key, $1.protocol) }),
      reloads: context.reloads.withLock { $0 }.reversed().map {
        ReloadRow(
          time: $0.time, result: $0.result, generation: $0.generation, error: $0.error,
          warnings: $0.warnings.isEmpty ? nil : $0.warnings)
      }, latency: metrics.histograms.flatMap { $0.latencyRows() }, warnings: warnings,
      localPrograms: metrics.localActivity.top(OperatorStatus.localProgramsShown).map {
        LocalProgramRow(user: $0.user, program: $0.program, requests: $0.requests, refusals: $0.refusals)
      })
  }
}

extension OperatorStatus.RuleRow {
  init(_ rule: CompiledRule, activity: RuleActivity, now: Date) {
    let policy = rule.policy.policy
    let entry = activity.entry(rule.name)
    let health =
      activity.health(of: rule) ?? PinHealth.configured(policy, hasDynamicList: rule.pinStore != nil, at: now)
    // What each configured pin matched in the last accepted chain.
    let pins = health.configuredPins.map { pin in
      let matched = health.matched?.pin == pin ? health.matched : nil
      return OperatorStatus.PinRow(
        pin: pin, matchedSubject: matched?.subject, matchedNotAfter: matched?.notAfter,
        backup: health.matched != nil && health.backupPins.contains(pin))
    }
    var list: OperatorStatus.DynamicListRow?
    if let store = rule.pinStore {
      let state = store.snapshot
      list = OperatorStatus.DynamicListRow(
        version: state.version, source: state.list.source.rawValue, entries: state.list.usable(at: now).count,
        lastUpdate: state.lastSuccess, nextUpdate: state.nextUpdate, lastFailure: state.lastFailure)
    }
    let revocation = policy.revocation
    self.init(
      name: rule.name, pinningMode: policy.pinningMode.rawValue, anchors: policy.anchors, pins: pins,
      pinsExpire: policy.hasStaticPins ? policy.pinsExpire : nil, dynamicList: list,
      transparency: rule.transparency.map { "required (\($0.requirement.minimumSCTs) SCTs)" }
        ?? "not required",
      revocation:
        "crl \(revocation.crl.rawValue), ocsp \(revocation.ocsp.rawValue), stapled \(revocation.stapledOCSP.rawValue)",
      lastVerdict: entry?.lastVerdict?.outcome, lastVerdictTime: entry?.lastVerdict?.time,
      refusalsLastHour: activity.refusalsInLastHour(rule.name, at: now),
      health: policy.pinningMode == .none && rule.pinStore == nil ? nil : OperatorStatus.HealthRow(health),
      parentProxy: rule.parent.map { "\($0.name) (\($0.url))" })
  }
}
