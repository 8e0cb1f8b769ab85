/// Slows password guessing: each client (its admission key: an IPv4
/// address, all of loopback, or one IPv6 /64) has a bucket of `burst`
/// attempts that refills at `perSecond`. Only a credential that needs
/// hashing takes a token (a correct one gives it back): a field that is not
/// a Basic credential, or one verified before, guesses nothing and costs
/// nothing. An empty bucket is answered 429 without hashing, so a guess made
/// then says nothing.
///
/// A client without a bucket has a full one: only a client actually in
/// debt is ever refused. The table is bounded by `maximumClients`; a new
/// client that finds it full first drops every bucket that has refilled
/// (forgetting it changes nothing), and when every bucket still owes
/// something, the one closest to full (it forgives the least debt). So
/// filling the table from many addresses (4,096 IPv4 addresses, or the
/// /64s of one /52) locks nobody out; it buys each address its own burst,
/// which it had anyway.
struct AuthThrottle {
  static let burst = 10.0
  static let perSecond = 0.5
  static let maximumClients = 4096

  private struct Bucket {
    var tokens: Double
    var last: UInt64
  }
  private var buckets: [String: Bucket] = [:]

  /// Clients held now (for tests and the bound).
  var count: Int { buckets.count }

  /// Takes a token for `client` at `now` (uptime ns); false when none is left.
  mutating func take(_ client: String, now: UInt64) -> Bool {
    var bucket = refilled(client, now: now)
    guard bucket.tokens >= 1 else {
      buckets[client] = bucket
      return false
    }
    bucket.tokens -= 1
    if buckets[client] == nil, buckets.count >= Self.maximumClients { makeRoom(now: now) }
    buckets[client] = bucket
    return true
  }

  /// A verified credential: its token goes back.
  mutating func refund(_ client: String, now: UInt64) {
    guard buckets[client] != nil else { return }
    var bucket = refilled(client, now: now)
    bucket.tokens = min(Self.burst, bucket.tokens + 1)
    buckets[client] = bucket.tokens >= Self.burst ? nil : bucket
  }

  /// Seconds until `client` has a token again; 0 for a client without a
  /// bucket, whatever the table holds.
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

  private func tokens(of bucket: Bucket, at now: UInt64) -> Double {
    bucket.tokens + Double(now &- bucket.last) / 1e9 * Self.perSecond
  }

  /// Frees at least one place in a full table: the refilled buckets, else
  /// the one with the most tokens.
  private mutating func makeRoom(now: UInt64) {
    buckets = buckets.filter { _, bucket in tokens(of: bucket, at: now) < Self.burst }
    guard buckets.count >= Self.maximumClients else { return }
    var fullest: (client: String, tokens: Double)?
    for (client, bucket) in buckets {
      let held = tokens(of: bucket, at: now)
      if fullest == nil || held > fullest!.tokens { fullest = (client, held) }
    }
    if let fullest { buckets[fullest.client] = nil }
  }
}
