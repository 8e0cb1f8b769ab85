import Foundation
import PinTrust
import Synchronization

/// What each domain rule has been doing: its last trust verdict and when,
/// the pin health of the last chain it accepted after a full evaluation,
/// and its refusals per minute over the last hour. Written on upstream
/// handshakes and refusals (never per request on a pooled connection), read
/// by the page, `/policies`, `/status` and `/metrics`.
///
/// Bounded: entries are keyed by rule names of the configuration (or `-`),
/// and a reload drops those of rules that are gone.
final class RuleActivity: Sendable {
  struct Verdict: Sendable, Codable, Equatable {
    /// `accepted`, or the failure code.
    let outcome: String
    let time: Date
  }

  struct Entry: Sendable {
    var lastVerdict: Verdict?
    var health: PinHealth?
    /// The compiled rule `health` was judged under: a reload compiles new
    /// rules, so health of a retired one is never shown as current.
    var judgedUnder: ObjectIdentifier?
    /// The chain `health` was judged on, and when (for `served-chains.json`).
    var chain: [Certificate]?
    var chainSeen: Date?
    /// Refusals per minute: (minute since the epoch, count), at most 60.
    var minutes: [(minute: Int, count: Int)] = []
    /// When each outcome (`accepted`, or a failure code) last happened:
    /// bounded by the failure codes.
    var lastByOutcome: [String: Date] = [:]
  }

  private let entries = Locked([String: Entry]())
  private let chainsChanges = Atomic(0)

  /// Moves whenever a rule's recorded chain may have changed (a chain
  /// judged, a reload): the served-chain recorder skips its tick when it has
  /// not.
  var chainsVersion: Int { chainsChanges.load(ordering: .acquiring) }
  private let chainsObserver = Locked<(@Sendable () -> Void)?>(nil)

  /// `changed` runs (on the thread that moved it) whenever `chainsVersion`
  /// moves: the served-chain recorder arms its timer from it.
  func observeChains(_ changed: @escaping @Sendable () -> Void) { chainsObserver.withLock { $0 = changed } }

  private func chainsMoved() {
    chainsChanges.add(1, ordering: .releasing)
    chainsObserver.withLock { $0 }?()
  }

  /// An accepted chain under `rule`. `chain` is given only after a full
  /// evaluation (a cache hit met the same chain before): then the pin
  /// health is judged anew.
  func accepted(rule: CompiledRule, chain: [Certificate]?, at time: Date) {
    let health = chain.map {
      PinHealth.assess(rule.policy.policy, chain: $0, hasDynamicList: rule.pinStore != nil, at: time)
    }
    let judged = entries.withLock { entries in
      entries[rule.name, default: Entry()].lastVerdict = Verdict(outcome: "accepted", time: time)
      entries[rule.name]!.lastByOutcome["accepted"] = time
      // Replaced by every chain judged, one that met no pin included (a
      // report-only rule whose origin moved off its pins must say so).
      if let health, !health.configuredPins.isEmpty {
        entries[rule.name]!.health = health
        entries[rule.name]!.judgedUnder = ObjectIdentifier(rule)
        entries[rule.name]!.chain = chain
        entries[rule.name]!.chainSeen = time
        return true
      }
      return false
    }
    if judged { chainsMoved() }
  }

  /// The pin health judged under `rule` itself (not under a rule of the same
  /// name that a reload retired), if a chain was judged since.
  func health(of rule: CompiledRule) -> PinHealth? {
    entries.withLock { entries in
      guard let entry = entries[rule.name], entry.judgedUnder == ObjectIdentifier(rule) else { return nil }
      return entry.health
    }
  }

  func refused(rule: String, code: FailureCode, at time: Date) {
    let minute = Int(time.timeIntervalSince1970 / 60)
    entries.withLock { entries in
      var entry = entries[rule, default: Entry()]
      entry.lastVerdict = Verdict(outcome: code.rawValue, time: time)
      entry.lastByOutcome[code.rawValue] = time
      if let last = entry.minutes.last, last.minute == minute {
        entry.minutes[entry.minutes.count - 1].count += 1
      } else {
        entry.minutes.append((minute, 1))
        if entry.minutes.count > 60 { entry.minutes.removeFirst(entry.minutes.count - 60) }
      }
      entries[rule] = entry
    }
  }

  /// A reload: keeps only the rules in force. Their pin health stays only
  /// until it is read: `health(of:)` shows none judged under a retired rule.
  func reloaded(keeping rules: Set<String>) {
    entries.withLock { entries in entries = entries.filter { rules.contains($0.key) || $0.key == "-" } }
    chainsMoved()
  }

  func entry(_ rule: String) -> Entry? { entries.withLock { $0[rule] } }

  /// The chain each rule last accepted after a full evaluation, by rule name.
  func servedChains() -> [String: ServedChains.Entry] {
    entries.withLock { entries in
      var out: [String: ServedChains.Entry] = [:]
      for (rule, entry) in entries {
        if let chain = entry.chain, let seen = entry.chainSeen { out[rule] = .init(chain: chain, seen: seen) }
      }
      return out
    }
  }

  /// `pinproxy_rule_last_verdict_timestamp_seconds{rule,outcome}`: when
  /// each rule last accepted and last refused for each code. A rule that
  /// accepted within the day and refuses `pin-mismatch` since is a key
  /// rotation the pins missed, even at one request a minute (the alert
  /// PinproxyPinRotationOutage).
  func renderVerdictTimes(into out: inout String) {
    let name = "pinproxy_rule_last_verdict_timestamp_seconds"
    out +=
      "# HELP \(name) When each rule last accepted a chain (outcome accepted) or last refused, by code.\n"
    out += "# TYPE \(name) gauge\n"
    let all = entries.withLock { $0 }
    for rule in all.keys.sorted() where rule != "-" {
      for (outcome, time) in all[rule]!.lastByOutcome.sorted(by: { $0.key < $1.key }) {
        out += "\(name){rule=\"\(ProxyMetrics.escape(rule))\",outcome=\"\(outcome)\"}"
        out += " \(String(format: "%.3f", time.timeIntervalSince1970))\n"
      }
    }
  }

  /// Refusals of `rule` in the hour before `time`.
  func refusalsInLastHour(_ rule: String, at time: Date) -> Int {
    let now = Int(time.timeIntervalSince1970 / 60)
    return entry(rule)?.minutes.filter { now - $0.minute < 60 }.reduce(0) { $0 + $1.count } ?? 0
  }
}
