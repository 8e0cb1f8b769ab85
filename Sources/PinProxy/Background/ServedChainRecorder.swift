import Foundation
import PinTrust
import Synchronization

/// Keeps `served-chains.json` in step with the chains the rules accept, for
/// `pinproxy check`: off the loops, at most every `interval` seconds, and
/// only when a rule's chain changed. Entries of rules no longer configured
/// are dropped; those of rules that accepted nothing since the start are
/// kept from the file (a restart forgets nothing the origin still serves).
///
/// The file is read once per path (at the first tick, and again only when a
/// reload moves the state directory); after that the recorder holds what it
/// wrote and never reads its own file back. Nothing runs while nothing
/// changes: a chain judged or a reload (`RuleActivity`'s observer) arms a
/// one-shot timer, so an idle daemon is never woken by this task.
final class ServedChainRecorder: @unchecked Sendable {
  static let interval: TimeInterval = 5

  private let timer = BackgroundTimer(label: "pinproxy.served-chains")
  private let activity: RuleActivity
  private let snapshot: @Sendable () -> RuntimeSnapshot
  /// Set by the first change after a tick, cleared by the tick it arms: one
  /// timer is pending at a time however many handshakes happen meanwhile.
  private let armed = Atomic(true)
  /// On `timer.queue`: the file's path and the entries it holds.
  private var file: (path: String, entries: [String: ServedChains.Entry])?
  /// On `timer.queue`: the chains' version and the snapshot last handled.
  private var handled: (chains: Int, snapshot: ObjectIdentifier)?

  init(activity: RuleActivity, snapshot: @escaping @Sendable () -> RuntimeSnapshot) {
    self.activity = activity
    self.snapshot = snapshot
  }

  /// The first tick reads the file and drops rules no longer pinned; later
  /// ticks are armed by changes only.
  func start() {
    activity.observeChains { [weak self] in self?.changed() }
    timer.start(after: Self.interval) { [weak self] in self?.tick() }
  }

  /// Any thread (an event loop judging a chain, a reload): cheap unless
  /// this is the first change since the last tick.
  private func changed() {
    guard armed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    else { return }
    timer.queue.async { [weak self] in self?.timer.schedule(after: Self.interval) }
  }

  private func tick() {
    dispatchPrecondition(condition: .onQueue(timer.queue))
    // Cleared before reading what changed: a change from here on arms the
    // next tick, so none is missed.
    armed.store(false, ordering: .releasing)
    let current = snapshot()
    let now = (chains: activity.chainsVersion, snapshot: ObjectIdentifier(current))
    if let handled, handled == now { return }
    let path = ServedChains.path(stateDirectory: StateDirectory.resolve(current.configuration.stateDirectory))
    let held = file?.path == path ? file!.entries : ServedChains.read(path)
    var entries = held
    for (rule, entry) in activity.servedChains() { entries[rule] = entry }
    let pinned = Set(current.rules.filter(\.pins).map(\.name))
    entries = entries.filter { pinned.contains($0.key) }
    if file?.path == path, Self.fingerprints(entries) == Self.fingerprints(held) {
      handled = now
      return
    }
    if ServedChains.write(entries, to: path) {
      (file, handled) = ((path, entries), now)
    } else {
      // Tried again after an interval, with what the file held before.
      file = (path, held)
      timer.schedule(after: Self.interval)
    }
  }

  private static func fingerprints(_ entries: [String: ServedChains.Entry]) -> [String: [Digest256]] {
    entries.mapValues { $0.chain.map(\.fingerprint) }
  }
}
