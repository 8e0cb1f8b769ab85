/// A moment a machine waits for something until (uptime nanoseconds, the
/// loop's clock), and the wait it allowed, for the refusal that names it.
/// A machine keeps its deadlines as state and takes `timeout(now:)`; the
/// host arms one loop timer for the earliest (quinn-proto's `poll_timeout`).
struct Deadline: Equatable {
  let at: UInt64
  let seconds: Double

  init(seconds: Double, from now: UInt64) {
    self.seconds = seconds
    at = now &+ UInt64(max(0, seconds) * 1e9)
  }

  func hasPassed(at now: UInt64) -> Bool { now >= at }
}
