/// A moment a machine waits for something until (uptime nanoseconds, the
/// loop's clock), and the wait it allowed, for the refusal that names it.
/// A machine keeps its deadlines as state and takes `timeout(now:)`; the
/// host arms one loop timer for the earliest (quinn-proto's `poll_timeout`).
struct Deadline: Equatable {
  let at: UInt64
  let seconds: Double

  /// `seconds` from `now`: NaN or a negative wait is due at once, a huge
  /// one saturates (never wraps round to the past).
  init(seconds: Double, from now: UInt64) {
    self.seconds = seconds
    let nanoseconds =
      seconds.isNaN || seconds <= 0
      ? 0 : seconds >= Double(UInt64.max) / 1e9 ? UInt64.max : UInt64(seconds * 1e9)
    let (sum, overflow) = now.addingReportingOverflow(nanoseconds)
    at = overflow ? .max : sum
  }

  func hasPassed(at now: UInt64) -> Bool { now >= at }
}
