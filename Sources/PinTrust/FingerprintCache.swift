import Foundation

/// Remembers acceptances for (policy identity and generation, host, presented
/// chain), so that a repeated handshake skips chain building and signature
/// checks.
///
/// - Only acceptances are cached. A refusal is re-evaluated every time: it is
///   cheap next to the handshake that produced it, and an attacker cannot fill
///   the cache with chains of its own making.
/// - An entry never outlives the earliest notAfter of the certificates its
///   decision relied on, nor `ttl` after it was stored.
/// - A new policy generation never matches an older entry; `removeAll` frees
///   them on reload.
/// - Bounded: each shard holds `capacity / shards` entries, evicted by CLOCK
///   (second chance), so a hit only sets a flag.
/// - Thread-safe: sharded by key hash, one `Locked` per shard, each on cache
///   lines of its own. Hits and misses are counted inside the shard's lock,
///   not in one shared atomic: a counter every lookup writes would move
///   between the cores of two loops on every hit, and made two threads slower
///   than one. A hit performs no heap allocation (the benchmark checks it).
public final class FingerprintCache: Sendable {
  public struct Key: Sendable, Hashable {
    public let policy: PolicyIdentity
    public let host: TrustHost?
    public let chain: PresentedChain
    /// The OCSP response the server stapled (empty without one): a verdict
    /// made on one staple is never served for a handshake with another.
    public let staple: [UInt8]
    /// The generation of the revocation information in force (fetched CRLs
    /// and OCSP answers): new information keys new verdicts, as a new pin
    /// list version does.
    public let revocation: UInt64
    /// Computed once, so choosing the shard and probing its table hash nothing again.
    let precomputedHash: Int

    public init(
      policy: PolicyIdentity, host: TrustHost?, chain: PresentedChain, staple: [UInt8] = [],
      revocation: UInt64 = 0
    ) {
      self.policy = policy
      self.host = host
      self.chain = chain
      self.staple = staple
      self.revocation = revocation
      var hash = KeyHash()
      hash.mix(policy.generation)
      hash.mix(policy.rule.word)
      hash.mix(policy.pinList)
      hash.mix(host)
      hash.mix(UInt64(chain.certificates.count))
      for der in chain.certificates { hash.mixTail(der) }
      hash.mix(revocation)
      // Like a certificate, a response differs from another in its signature, at the end.
      hash.mixTail(staple)
      precomputedHash = hash.value
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(precomputedHash) }

    /// What a `Dictionary` asks for, without a SipHash over the precomputed
    /// hash on every probe (a fifth of a hit's cost): that hash is already
    /// keyed per process (`KeyHash`'s random seed) and folded, so one
    /// multiply mixes in the table's own seed.
    public func _rawHashValue(seed: Int) -> Int {
      let mixed = UInt64(bitPattern: Int64(precomputedHash ^ seed)) &* 0x9E37_79B9_7F4A_7C15
      return Int(truncatingIfNeeded: mixed ^ mixed >> 29)
    }

    /// Cheap fields first; the chain's bytes are compared only when all else matches.
    public static func == (lhs: Key, rhs: Key) -> Bool {
      lhs.precomputedHash == rhs.precomputedHash && lhs.policy == rhs.policy && lhs.host == rhs.host
        && lhs.revocation == rhs.revocation && PresentedChain.bytesEqual(lhs.staple, rhs.staple)
        && lhs.chain == rhs.chain
    }
  }

  public let capacity: Int
  public let ttl: TimeInterval
  private let shards: [Locked<ShardState>]

  public init(capacity: Int = 8192, ttl: TimeInterval = 3600, shardCount: Int = 16) {
    precondition(capacity > 0 && shardCount > 0 && ttl > 0)
    let shardCount = min(shardCount, capacity)
    self.capacity = capacity
    self.ttl = ttl
    let perShard = (capacity + shardCount - 1) / shardCount
    shards = (0..<shardCount).map { _ in Locked(ShardState(capacity: perShard)) }
  }

  /// The cached acceptance for `key` if one is still in force at `time`.
  public func lookup(_ key: Key, at time: Date) -> Acceptance? {
    guard case .trusted(let acceptance)? = decision(for: key, at: time) else { return nil }
    return acceptance
  }

  /// The same as the stored `.trusted` decision: one reference, no copy of
  /// the acceptance (what a hit in `TrustEngine` returns).
  public func decision(for key: Key, at time: Date) -> TrustDecision? {
    shard(for: key).withLock { state in state.lookup(key, at: time) }
  }

  /// Stores an acceptance made at `time`; it expires at the earlier of its
  /// `validUntil` and `time + ttl`.
  public func insert(_ key: Key, acceptance: Acceptance, at time: Date) {
    let expiry = min(acceptance.validUntil, time.addingTimeInterval(ttl))
    guard expiry > time else { return }
    shard(for: key).withLock { state in state.insert(key, acceptance: acceptance, expiry: expiry) }
  }

  public func removeAll() {
    for shard in shards { shard.withLock { $0.removeAll() } }
  }

  public var count: Int {
    shards.reduce(0) { total, shard in total + shard.withLock { $0.index.count } }
  }
  public var hits: Int { shards.reduce(0) { total, shard in total + shard.withLock { $0.hits } } }
  public var misses: Int { shards.reduce(0) { total, shard in total + shard.withLock { $0.misses } } }

  private func shard(for key: Key) -> Locked<ShardState> {
    shards[Int(UInt(bitPattern: key.precomputedHash) % UInt(shards.count))]
  }
}

/// The key's hash, made once per handshake: a multiply-and-fold over a few
/// words (the policy's numbers, the host's bytes, each certificate's length
/// and last 16 bytes, which fall in its signature) rather than SipHash over
/// them, which was half the cost of a hit. The seed is random per process and
/// the dictionary hashes the result again with its own seeded SipHash, so
/// keys that collide cannot be chosen from outside; and only acceptances
/// are stored, so a client cannot fill a shard with chains of its making.
struct KeyHash {
  private static let seed = UInt64.random(in: 1...UInt64.max)
  private var state = KeyHash.seed

  @inline(__always)
  mutating func mix(_ word: UInt64) {
    let product = (state ^ word).multipliedFullWidth(by: 0x9E37_79B9_7F4A_7C15)
    state = product.high ^ product.low
  }

  mutating func mix(_ host: TrustHost?) {
    guard case .dns(var name) = host else {
      mix(UInt64(bitPattern: Int64(host?.hashValue ?? 0)))
      return
    }
    name.withUTF8 { mixBytes(UnsafeRawBufferPointer($0)) }
  }

  /// The length and the last 16 bytes (fewer when shorter).
  mutating func mixTail(_ bytes: [UInt8]) {
    mix(UInt64(bytes.count))
    bytes.withUnsafeBytes { mixBytes(UnsafeRawBufferPointer(rebasing: $0.suffix(16))) }
  }

  /// Every byte, eight at a time, then the rest in one word; the count first.
  private mutating func mixBytes(_ bytes: UnsafeRawBufferPointer) {
    mix(UInt64(bytes.count))
    var offset = 0
    while offset + 8 <= bytes.count {
      mix(bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
      offset += 8
    }
    var last: UInt64 = 0
    while offset < bytes.count {
      last = last << 8 | UInt64(bytes[offset])
      offset += 1
    }
    mix(last)
  }

  var value: Int {
    // A last fold so that every input bit reaches the low bits shards use.
    var folded = state ^ state >> 29
    folded = folded &* 0xBF58_476D_1CE4_E5B9
    return Int(truncatingIfNeeded: folded ^ folded >> 32)
  }
}

/// Which rule of a configuration governs a host.
public enum RuleID: Sendable, Hashable, CustomStringConvertible {
  /// `domains[index]`.
  case domain(Int)
  /// No domain rule matched; `defaults` applies.
  case defaults
  /// A passthrough splice: the client's own TLS, no policy of ours.
  case passthrough

  /// One word naming the rule, for the cache key's hash.
  var word: UInt64 {
    switch self {
    case .domain(let index): return UInt64(truncatingIfNeeded: index) << 2
    case .defaults: return 1
    case .passthrough: return 2
    }
  }

  public var description: String {
    switch self {
    case .domain(let index): return "r\(index)"
    case .defaults: return "defaults"
    case .passthrough: return "passthrough"
    }
  }
}

/// The identity of a compiled policy: which configuration generation it came
/// from, which rule it is within it, and for a rule with `dynamicPins` which
/// version of its list (0 without one). Versions are unique across the
/// process and only grow, so a connection or verdict keyed by an older list
/// never matches a key made under the current one.
public struct PolicyIdentity: Sendable, Hashable, CustomStringConvertible {
  public let generation: UInt64
  public let rule: RuleID
  public let pinList: UInt64

  public init(generation: UInt64, rule: RuleID, pinList: UInt64 = 0) {
    self.generation = generation
    self.rule = rule
    self.pinList = pinList
  }

  /// The same rule under list version `version`.
  public func under(pinList version: UInt64) -> PolicyIdentity {
    PolicyIdentity(generation: generation, rule: rule, pinList: version)
  }

  public var description: String { "g\(generation)/\(rule)" + (pinList == 0 ? "" : "/l\(pinList)") }
}

private struct ShardState {
  struct Slot {
    var key: FingerprintCache.Key
    /// Always `.trusted`: only acceptances are stored.
    var decision: TrustDecision
    var expiry: Date
    var referenced: Bool
  }

  let capacity: Int
  var slots: [Slot] = []
  var index: [FingerprintCache.Key: Int] = [:]
  var hand = 0
  var hits = 0
  var misses = 0

  init(capacity: Int) {
    self.capacity = capacity
    slots.reserveCapacity(capacity)
    index.reserveCapacity(capacity)
  }

  mutating func lookup(_ key: FingerprintCache.Key, at time: Date) -> TrustDecision? {
    guard let position = index[key], time < slots[position].expiry, time >= .distantPast else {
      misses &+= 1
      return nil
    }
    hits &+= 1
    // Written only when it changes: a hit on a hot entry leaves its line clean.
    if !slots[position].referenced { slots[position].referenced = true }
    return slots[position].decision
  }

  mutating func insert(_ key: FingerprintCache.Key, acceptance: Acceptance, expiry: Date) {
    if let position = index[key] {
      slots[position].decision = .trusted(acceptance)
      slots[position].expiry = expiry
      slots[position].referenced = true
      return
    }
    let slot = Slot(key: key, decision: .trusted(acceptance), expiry: expiry, referenced: false)
    if slots.count < capacity {
      index[key] = slots.count
      slots.append(slot)
      return
    }
    // CLOCK: skip (and clear) referenced slots; evict the first unreferenced one.
    while slots[hand].referenced {
      slots[hand].referenced = false
      hand = (hand + 1) % capacity
    }
    index[slots[hand].key] = nil
    slots[hand] = slot
    index[key] = hand
    hand = (hand + 1) % capacity
  }

  mutating func removeAll() {
    slots.removeAll(keepingCapacity: true)
    index.removeAll(keepingCapacity: true)
    hand = 0
  }
}
