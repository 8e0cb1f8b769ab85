/// Slows password guessing: each client address (the admission key, so all
/// of loopback or one IPv6 /64 is one client) has a bucket of `burst`
/// attempts that refills at `perSecond`. A credential that needs hashing
/// takes a token first (a correct one gives it back); an empty bucket is
/// answered 429 without looking at the credential at all, so a guess made
/// then says nothing. The table is bounded: past `maximumClients` the
/// client idle the longest is forgotten.
struct AuthThrottle {
  static let burst = 10.0
  static let perSecond = 0.5
  static let maximumClients = 4096

  private struct Bucket {
    var tokens: Double
    var last: UInt64
  }
  private var buckets: [String: Bucket] = [:]

  /// Takes a token for `client` at `now` (uptime ns); false when none is left.
  mutating func take(_ client: String, now: UInt64) -> Bool {
    var bucket = refilled(client, now: now)
    guard bucket.tokens >= 1 else {
      buckets[client] = bucket
      return false
    }
    bucket.tokens -= 1
    store(client, bucket)
    return true
  }

  /// A verified credential: its token goes back.
  mutating func refund(_ client: String, now: UInt64) {
    var bucket = refilled(client, now: now)
    bucket.tokens = min(Self.burst, bucket.tokens + 1)
    if bucket.tokens >= Self.burst { buckets[client] = nil } else { store(client, bucket) }
  }

  /// Seconds until `client` has a token again.
  func secondsUntilToken(_ client: String, now: UInt64) -> Int {
    let tokens = refilled(client, now: now).tokens
    return tokens >= 1 ? 0 : Int(((1 - tokens) / Self.perSecond).rounded(.up))
  }

  private func refilled(_ client: String, now: UInt64) -> Bucket {
    guard var bucket = buckets[client] else { return Bucket(tokens: Self.burst, last: now) }
    bucket.tokens = min(Self.burst, bucket.tokens + Double(now &- bucket.last) / 1e9 * Self.perSecond)
    bucket.last = now
    return bucket
  }

  private mutating func store(_ client: String, _ bucket: Bucket) {
    if buckets[client] == nil, buckets.count >= Self.maximumClients,
      let oldest = buckets.min(by: { $0.value.last < $1.value.last })?.key
    {
      buckets[oldest] = nil
    }
    buckets[client] = bucket
  }
}
