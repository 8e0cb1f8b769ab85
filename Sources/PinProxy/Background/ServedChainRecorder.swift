import Foundation
import PinTrust

/// Keeps `served-chains.json` in step with the chains the rules accept, for
/// `pinproxy check`: every `interval` seconds, off the loops, and only when
/// a rule's chain changed. Entries of rules no longer configured are
/// dropped; those of rules that accepted nothing since the start are kept
/// from the file (a restart forgets nothing the origin still serves). The
/// file is small (a chain per pinned rule), so it is read each tick.
final class ServedChainRecorder: @unchecked Sendable {
  static let interval: TimeInterval = 5

  private let timer = BackgroundTimer(label: "pinproxy.served-chains")
  private let activity: RuleActivity
  private let snapshot: @Sendable () -> RuntimeSnapshot
  /// On `timer.queue`: what the file holds, by rule, as certificate fingerprints.
  private var written: [String: [Digest256]]?
  private var path: String?

  init(activity: RuleActivity, snapshot: @escaping @Sendable () -> RuntimeSnapshot) {
    self.activity = activity
    self.snapshot = snapshot
  }

  func start() {
    timer.start(after: Self.interval, repeating: Self.interval) { [weak self] in self?.tick() }
  }

  private func tick() {
    dispatchPrecondition(condition: .onQueue(timer.queue))
    let current = snapshot()
    let path = ServedChains.path(stateDirectory: StateDirectory.resolve(current.configuration.stateDirectory))
    if path != self.path { (self.path, written) = (path, nil) }
    var entries = ServedChains.read(path)
    for (rule, entry) in activity.servedChains() { entries[rule] = entry }
    let pinned = Set(current.rules.filter(\.pins).map(\.name))
    entries = entries.filter { pinned.contains($0.key) }
    let fingerprints = entries.mapValues { $0.chain.map(\.fingerprint) }
    guard fingerprints != written else { return }
    if ServedChains.write(entries, to: path) { written = fingerprints }
  }
}
