/// Slows password guessing: each client (its admission key: an IPv4
/// address, all of loopback, or one IPv6 /64) has a bucket of `burst`
/// attempts that refills at `perSecond`. A credential that needs hashing
/// takes a token first (a correct one gives it back); an empty bucket is
/// answered 429 without looking at the credential at all, so a guess made
/// then says nothing. The table is bounded: past `maximumClients` only
/// buckets that have refilled completely (forgetting them changes nothing)
/// are dropped; when every bucket still holds a debt, a client not in the
/// table is refused as if its own bucket were empty, so that a guesser
/// cannot buy fresh buckets by filling the table from many addresses.
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
    return store(client, bucket, now: now)
  }

  /// A verified credential: its token goes back.
  mutating func refund(_ client: String, now: UInt64) {
    guard var bucket = buckets[client] else { return }
    bucket = refilled(client, now: now)
    bucket.tokens = min(Self.burst, bucket.tokens + 1)
    buckets[client] = bucket.tokens >= Self.burst ? nil : bucket
  }

  /// Seconds until `client` has a token again.
  func secondsUntilToken(_ client: String, now: UInt64) -> Int {
    guard buckets[client] != nil || buckets.count < Self.maximumClients else {
      return Int((1 / Self.perSecond).rounded(.up))
    }
    let tokens = refilled(client, now: now).tokens
    return tokens >= 1 ? 0 : Int(((1 - tokens) / Self.perSecond).rounded(.up))
  }

  private func refilled(_ client: String, now: UInt64) -> Bucket {
    guard var bucket = buckets[client] else { return Bucket(tokens: Self.burst, last: now) }
    bucket.tokens = min(Self.burst, bucket.tokens + Double(now &- bucket.last) / 1e9 * Self.perSecond)
    bucket.last = now
    return bucket
  }

  /// Keeps `bucket`; false when the table is full of clients still in debt.
  private mutating func store(_ client: String, _ bucket: Bucket, now: UInt64) -> Bool {
    if buckets[client] == nil, buckets.count >= Self.maximumClients {
      buckets = buckets.filter { _, old in
        old.tokens + Double(now &- old.last) / 1e9 * Self.perSecond < Self.burst
      }
      guard buckets.count < Self.maximumClients else { return false }
    }
    buckets[client] = bucket
    return true
  }
}
