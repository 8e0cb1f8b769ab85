import Foundation

/// The evaluator behind the fingerprint cache: the entry point the data path
/// calls for every upstream handshake.
///
/// The cache is partitioned, one partition per event loop, and a loop's
/// handshakes use its own (`partition(_:)`). A cache shared by two loops made
/// two loops slower than one: every hit retains and releases the stored
/// entry and its shard, whose reference counts then moved between the cores
/// on every hit. A chain cached on one loop is evaluated once more on another
/// (as nginx's workers each keep their own caches); the bound on entries is
/// split between the partitions, so it is unchanged.
public struct TrustEngine: Sendable {
  public let caches: [FingerprintCache]
  private let selected: Int

  /// The cache this engine's evaluations use.
  public var cache: FingerprintCache { caches[selected] }

  public init(cache: FingerprintCache = FingerprintCache()) {
    caches = [cache]
    selected = 0
  }

  /// `partitions` caches sharing `capacity` entries between them.
  public init(partitions: Int, capacity: Int = 8192) {
    let count = max(1, partitions)
    caches = (0..<count).map { _ in FingerprintCache(capacity: max(1, capacity / count)) }
    selected = 0
  }

  private init(caches: [FingerprintCache], selected: Int) {
    self.caches = caches
    self.selected = selected
  }

  /// The same engine on partition `index` (a loop's index; wraps around).
  public func partition(_ index: Int) -> TrustEngine {
    TrustEngine(caches: caches, selected: index % caches.count)
  }

  /// Empties every partition (a reload).
  public func removeAll() { for cache in caches { cache.removeAll() } }
  public var hits: Int { caches.reduce(0) { $0 + $1.hits } }
  public var misses: Int { caches.reduce(0) { $0 + $1.misses } }
  public var entryCount: Int { caches.reduce(0) { $0 + $1.count } }

  /// A cached acceptance when one is in force; otherwise a full evaluation
  /// (`RuleEvaluator`), whose acceptance is cached. Refusals are never
  /// cached, nor report-only acceptances that waived a pin failure (each
  /// connection is logged and reported as one that would have been refused).
  ///
  /// - Parameters:
  ///   - identity: must name `dynamicPins`' list version
  ///     (`PolicyIdentity.pinList`), so that an acceptance under one list is
  ///     never served under another.
  ///   - revocation: the revocation step; its staple and
  ///     `revocationGeneration` key the cache, so a verdict is never served
  ///     for another staple or after new revocation information arrived.
  public func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy,
    dynamicPins: DynamicPinRequirement? = nil,
    identity: PolicyIdentity, verifier: some ChainVerifier, revocation: RevocationInput? = nil,
    revocationGeneration: UInt64 = 0, at time: Date
  ) -> TrustDecision {
    var cached = false
    return evaluate(
      chain, host: host, policy: policy, dynamicPins: dynamicPins, identity: identity, verifier: verifier,
      revocation: revocation, revocationGeneration: revocationGeneration, at: time, cached: &cached)
  }

  /// The same, telling whether the cache served the decision (`cached`).
  public func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy,
    dynamicPins: DynamicPinRequirement? = nil,
    identity: PolicyIdentity, verifier: some ChainVerifier, revocation: RevocationInput? = nil,
    revocationGeneration: UInt64 = 0, at time: Date, cached: inout Bool
  ) -> TrustDecision {
    let key = FingerprintCache.Key(
      policy: identity, host: host, chain: chain, staple: revocation?.staple ?? [],
      revocation: revocationGeneration)
    if let decision = cache.decision(for: key, at: time) {
      cached = true
      return decision
    }
    cached = false
    let decision = RuleEvaluator.evaluate(
      chain, host: host, policy: policy, dynamicPins: dynamicPins, verifier: verifier, revocation: revocation,
      at: time)
    if case .trusted(var acceptance) = decision, acceptance.waivedPinFailure == nil {
      // A cached acceptance holds no certificates; the caller of a full
      // evaluation still gets the path (pin health is judged on it).
      acceptance.path = []
      cache.insert(key, acceptance: acceptance, at: time)
    }
    return decision
  }
}
