/// A token bucket for client-cancelled exchanges: `burst` at once, then
/// `perSecond` (the bounds Envoy and nginx chose for CVE-2023-44487 are of
/// this order).
struct ResetBucket {
  static let burst = 100.0
  static let perSecond = 10.0
  private var tokens = burst
  private var last: UInt64 = 0

  /// Spends a token; false when none is left.
  mutating func take(now: UInt64) -> Bool {
    if last != 0 {
      tokens = min(Self.burst, tokens + Double(now &- last) / 1e9 * Self.perSecond)
    }
    last = now
    guard tokens >= 1 else { return false }
    tokens -= 1
    return true
  }
}
