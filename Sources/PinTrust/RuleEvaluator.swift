import Foundation

/// A domain rule's whole decision: the AFSecurityPolicy evaluation
/// (`TrustEvaluator`), then the rule's dynamic pin list (`DynamicPinCheck`),
/// then report-only. Policies compose: each later step can only refuse what
/// an earlier one accepted, except the one waiver report-only makes, below.
///
/// Pure: no I/O, no clock of its own.
public enum RuleEvaluator {
  /// - Parameter dynamicPins: the rule's list in force, nil without `dynamicPins`.
  public static func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, dynamicPins: DynamicPinRequirement?,
    verifier: some ChainVerifier, at time: Date
  ) -> TrustDecision {
    let decision = TrustEvaluator.evaluate(chain, host: host, policy: policy, verifier: verifier, at: time)
    switch decision {
    case .rejected(let failure):
      guard failure.isPinFailure, !policy.enforcesPins else { return decision }
      return waive(failure, chain: chain, host: host, policy: policy, verifier: verifier, at: time)
    case .trusted(let acceptance):
      guard let dynamicPins else { return decision }
      let certificates = verifier.certificates(of: chain)
      switch DynamicPinCheck.evaluate(certificates, requirement: dynamicPins, at: time) {
      case .success(let entry):
        var pinned = acceptance
        pinned.basis = .dynamicPin(entry, under: acceptance.basis)
        pinned.validUntil = min(acceptance.validUntil, entry.expires)
        return .trusted(pinned)
      case .failure(let failure):
        guard !policy.enforcesPins else { return .rejected(failure) }
        // Report-only: the static policy accepted, so the chain stands
        // exactly as it would without the list; only the list is waived.
        var waived = acceptance
        waived.waivedPinFailure = failure
        return .trusted(waived)
      }
    }
  }

  /// Report-only for a static pin failure (TrustKit's `enforcePinning: false`):
  /// only the pin check is waived. The chain must still be valid against the
  /// policy's anchors and, when the policy validates the domain name, for the
  /// host: the policy is evaluated again without pins and without
  /// `allowInvalidCertificates` (in AF's pinning modes it is the pin that
  /// makes allowing invalid certificates acceptable, so once the pin is
  /// waived the chain has to carry the decision). The acceptance names the
  /// failure it waived.
  private static func waive(
    _ failure: TrustFailure, chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy,
    verifier: some ChainVerifier, at time: Date
  ) -> TrustDecision {
    var unpinned = policy
    unpinned.pinningMode = .none
    unpinned.allowInvalidCertificates = false
    switch TrustEvaluator.evaluate(chain, host: host, policy: unpinned, verifier: verifier, at: time) {
    case .rejected(let chainFailure): return .rejected(chainFailure)
    case .trusted(var acceptance):
      acceptance.waivedPinFailure = failure
      return .trusted(acceptance)
    }
  }
}
