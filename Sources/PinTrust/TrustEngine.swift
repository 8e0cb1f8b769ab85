import Foundation

/// The evaluator behind the fingerprint cache: the entry point the data path
/// calls for every upstream handshake.
public struct TrustEngine: Sendable {
  public let cache: FingerprintCache

  public init(cache: FingerprintCache = FingerprintCache()) { self.cache = cache }

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
    let key = FingerprintCache.Key(
      policy: identity, host: host, chain: chain, staple: revocation?.staple ?? [],
      revocation: revocationGeneration)
    if let acceptance = cache.lookup(key, at: time) { return .trusted(acceptance) }
    let decision = RuleEvaluator.evaluate(
      chain, host: host, policy: policy, dynamicPins: dynamicPins, verifier: verifier, revocation: revocation,
      at: time)
    if case .trusted(let acceptance) = decision, acceptance.waivedPinFailure == nil {
      cache.insert(key, acceptance: acceptance, at: time)
    }
    return decision
  }
}
