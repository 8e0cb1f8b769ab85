import PinEventLoop

/// A moment a machine waits for something until (uptime nanoseconds, the
/// loop's clock), and the wait it allowed, for the refusal that names it.
/// A machine keeps its deadlines as state and takes `timeout(now:)`; the
/// host arms one loop timer for the earliest (quinn-proto's `poll_timeout`).
struct Deadline: Equatable {
  let at: UInt64
  let seconds: Double

  /// `seconds` from `now`, with the loop's own arithmetic
  /// (`EventLoop.deadline(after:now:)`): NaN or a negative wait is due at
  /// once, a huge one saturates (never wraps round to the past).
  init(seconds: Double, from now: UInt64) {
    self.seconds = seconds
    at = EventLoop.deadline(after: seconds, now: now)
  }

  func hasPassed(at now: UInt64) -> Bool { now >= at }
}
