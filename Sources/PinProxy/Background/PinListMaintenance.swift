import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// `pinproxy pins show` and `pinproxy pins update`: the stored lists of a
/// configuration, and a fetch of each one now, through the same fetch,
/// verification and store as the daemon's updater.
public enum PinListMaintenance {
  /// What one rule's fetch did.
  public struct UpdateResult: Sendable {
    public let rule: String
    public let url: String
    /// nil on success; otherwise why the update was refused or failed.
    public let failure: String?
    public let added: [PinListEntry]
    public let removed: [PinListEntry]
    public let entries: Int
    public let file: String
    public let writeError: String?
  }

  /// The rules with `dynamicPins` and their lists in force (stored, fallback
  /// or none), as JSON.
  public static func show(_ snapshot: RuntimeSnapshot, now: Date = Date()) -> String {
    let rules = snapshot.rules.compactMap { rule -> [String: Any]? in
      guard let store = rule.pinStore else { return nil }
      return ["rule": rule.name, "dynamicPins": PolicyReport.dynamicPins(store, now: now)]
    }
    let data =
      (try? JSONSerialization.data(
        withJSONObject: rules, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])) ?? Data()
    return String(decoding: data, as: UTF8.self)
  }

  /// Fetches every rule's list now, one after the other, and stores each
  /// verified update. Blocks the calling thread (a CLI's), never a loop.
  public static func update(_ snapshot: RuntimeSnapshot) -> [UpdateResult] {
    let group = EventLoopGroup(count: 1)
    let dialer = UpstreamDialer(
      snapshot: snapshot, trustEngine: TrustEngine(), sessions: TLSSessionCache(), metrics: ProxyMetrics(),
      reporter: nil)
    var results: [UpdateResult] = []
    for compiled in snapshot.rules {
      guard let store = compiled.pinStore else { continue }
      let rule = compiled.name
      let outcome = Locked<Result<PinListUpdate.Outcome, PinListFetch.Failure>?>(nil)
      let done = DispatchSemaphore(value: 0)
      PinListFetch.run(store, dialer: dialer, on: group.loops[0]) { result in
        outcome.withLock { $0 = result }
        done.signal()
      }
      done.wait()
      switch outcome.withLock({ $0 })! {
      case .failure(let failure):
        results.append(
          UpdateResult(
            rule: rule, url: store.spec.url.description, failure: "\(failure.reason): \(failure.description)",
            added: [], removed: [], entries: store.snapshot.list.entries.count, file: store.spec.file,
            writeError: nil))
      case .success(let update):
        let (previous, writeError) = store.install(update.list, at: Date())
        let (added, removed) = PinListFetch.changes(from: previous, to: update.list)
        results.append(
          UpdateResult(
            rule: rule, url: store.spec.url.description, failure: nil, added: added, removed: removed,
            entries: update.list.entries.count, file: store.spec.file, writeError: writeError))
      }
    }
    return results
  }
}
