import Foundation

/// When to fetch a list again (the Wultra schedule), and how long to wait
/// after a failed fetch. Pure arithmetic over injected instants.
public enum PinListSchedule {
  /// T is the time to the earliest expiry among the newest entry of each
  /// name. Under `threshold` the list is about to run out, so it is fetched
  /// at T × 0.125 (several tries before it does); T ≤ 0 means now. The wait
  /// is never longer than `interval`. An empty list is due now.
  public static func nextUpdate(
    for entries: [PinListEntry], interval: TimeInterval, threshold: TimeInterval, at time: Date
  ) -> Date {
    var newest: [String: Date] = [:]
    for entry in entries { newest[entry.name] = max(newest[entry.name] ?? .distantPast, entry.expires) }
    guard let earliest = newest.values.min() else { return time }
    var wait = earliest.timeIntervalSince(time)
    if wait <= 0 {
      wait = 0
    } else if wait < threshold {
      wait *= 0.125
    }
    return time.addingTimeInterval(min(wait, interval))
  }

  /// The wait after the `failures`-th consecutive failed fetch: 10 s doubling
  /// up to 15 minutes, but no longer than the rule's `interval` (a rule that
  /// asks for frequent updates retries as often), and at least a second.
  public static func retryDelay(afterFailures failures: Int, interval: TimeInterval) -> TimeInterval {
    let exponent = min(max(failures, 1) - 1, 10)
    let backoff = min(10 * Double(1 << exponent), 900)
    return max(1, min(backoff, interval))
  }
}
