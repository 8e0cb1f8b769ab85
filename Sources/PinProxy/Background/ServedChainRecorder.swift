import Foundation
import PinTrust

/// Keeps `served-chains.json` in step with the chains the rules accept, for
/// `pinproxy check`: every `interval` seconds, off the loops, and only when
/// a rule's chain changed. Entries of rules no longer configured are
/// dropped; those of rules that accepted nothing since the start are kept
/// from the file (a restart forgets nothing the origin still serves). The
/// file is small (a chain per pinned rule), so it is read whenever there is
/// something to write; a tick that finds neither a chain recorded nor a
/// reload since the last one does nothing at all (an idle daemon neither
/// reads nor allocates).
final class ServedChainRecorder: @unchecked Sendable {
  static let interval: TimeInterval = 5

  private let timer = BackgroundTimer(label: "pinproxy.served-chains")
  private let activity: RuleActivity
  private let snapshot: @Sendable () -> RuntimeSnapshot
  /// On `timer.queue`: what the file holds, by rule, as certificate fingerprints.
  private var written: [String: [Digest256]]?
  private var path: String?
  /// On `timer.queue`: the chains' version and the snapshot last handled.
  private var handled: (chains: Int, snapshot: ObjectIdentifier)?

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
    let now = (chains: activity.chainsVersion, snapshot: ObjectIdentifier(current))
    if let handled, handled == now { return }
    let path = ServedChains.path(stateDirectory: StateDirectory.resolve(current.configuration.stateDirectory))
    if path != self.path { (self.path, written) = (path, nil) }
    var entries = ServedChains.read(path)
    for (rule, entry) in activity.servedChains() { entries[rule] = entry }
    let pinned = Set(current.rules.filter(\.pins).map(\.name))
    entries = entries.filter { pinned.contains($0.key) }
    let fingerprints = entries.mapValues { $0.chain.map(\.fingerprint) }
    guard fingerprints != written else {
      handled = now
      return
    }
    // A write that failed is tried again at the next tick.
    if ServedChains.write(entries, to: path) { (written, handled) = (fingerprints, now) }
  }
}
