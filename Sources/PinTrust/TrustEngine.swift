import Foundation

/// The evaluator behind the fingerprint cache: the entry point the data path
/// calls for every upstream handshake.
public struct TrustEngine: Sendable {
  public let cache: FingerprintCache

  public init(cache: FingerprintCache = FingerprintCache()) { self.cache = cache }

  /// A cached acceptance when one is in force; otherwise a full evaluation,
  /// whose acceptance is cached. Refusals are never cached.
  public func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, identity: PolicyIdentity,
    verifier: some ChainVerifier, at time: Date
  ) -> TrustDecision {
    let key = FingerprintCache.Key(policy: identity, host: host, chain: chain)
    if let acceptance = cache.lookup(key, at: time) { return .trusted(acceptance) }
    let decision = TrustEvaluator.evaluate(chain, host: host, policy: policy, verifier: verifier, at: time)
    if case .trusted(let acceptance) = decision { cache.insert(key, acceptance: acceptance, at: time) }
    return decision
  }
}
