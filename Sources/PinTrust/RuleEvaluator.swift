import Foundation

/// A domain rule's whole decision: the AFSecurityPolicy evaluation
/// (`TrustEvaluator`), the ATS identities (`IdentityPinCheck`), then the
/// rule's dynamic pin list (`DynamicPinCheck`), then report-only. Policies
/// compose: each later step can only refuse what an earlier one accepted,
/// except for two waivers, both explicit in the rule: report-only, and the
/// expiry of the static pins (`pinsExpire`).
///
/// Pure: no I/O, no clock of its own.
public enum RuleEvaluator {
  /// - Parameters:
  ///   - dynamicPins: the rule's list in force, nil without `dynamicPins`.
  ///   - revocation: the revocation step's source and this handshake's
  ///     staple; nil leaves revocation out (callers that only ask about the
  ///     chain and pins).
  public static func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, dynamicPins: DynamicPinRequirement?,
    verifier: some ChainVerifier, revocation: RevocationInput? = nil, at time: Date
  ) -> TrustDecision {
    let decision = evaluateRule(
      chain, host: host, policy: policy, dynamicPins: dynamicPins, verifier: verifier, at: time)
    guard let revocation, case .trusted(var acceptance) = decision else { return decision }
    // Last: revocation can only refuse what every other check accepted.
    // Only a chain that verified sends the proxy to the URLs it names: one
    // accepted under `allowInvalidCertificates` decides with what is at hand.
    let anchored = acceptance.waived == nil
    let evidence = revocation.source.evidence(
      for: acceptance.path, anchored: anchored, staple: revocation.staple, settings: revocation.settings,
      fetching: revocation.fetching && anchored, at: time)
    switch RevocationCheck.evaluate(
      path: acceptance.path, evidence: evidence, settings: revocation.settings, anchored: anchored, at: time)
    {
    case .refused(let failure): return .rejected(failure)
    case .needs(let fetches): return .rejected(.revocationPending(fetches))
    case .passed(let validUntil, let softFailure):
      acceptance.validUntil = min(acceptance.validUntil, validUntil)
      acceptance.revocationSoftFailure = softFailure
      return .trusted(acceptance)
    }
  }

  private static func evaluateRule(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, dynamicPins: DynamicPinRequirement?,
    verifier: some ChainVerifier, at time: Date
  ) -> TrustDecision {
    if let expiry = policy.pinsExpire, policy.hasStaticPins {
      guard time < expiry else {
        // Accepted without the static pins only because the rule says they
        // expired (TrustKit `expirationDate`, Android `<pin-set
        // expiration>`): both fail open on purpose so that a forgotten
        // rotation does not brick clients. The chain, host, TLS rules and
        // any dynamic list still apply; the acceptance says the pins expired.
        let decision = evaluateRule(
          chain, host: host, policy: policy.withoutStaticPins, dynamicPins: dynamicPins, verifier: verifier,
          at: time)
        guard case .trusted(var acceptance) = decision else { return decision }
        acceptance.pinsExpired = expiry
        return .trusted(acceptance)
      }
      // A verdict made under the pins must not outlive them: after the
      // expiry the rule is evaluated differently (without allowInvalid too).
      let decision = evaluatePinned(chain, host, policy, dynamicPins, verifier, time)
      guard case .trusted(var acceptance) = decision else { return decision }
      acceptance.validUntil = min(acceptance.validUntil, expiry)
      return .trusted(acceptance)
    }
    return evaluatePinned(chain, host, policy, dynamicPins, verifier, time)
  }

  private static func evaluatePinned(
    _ chain: PresentedChain, _ host: TrustHost?, _ policy: SecurityPolicy,
    _ dynamicPins: DynamicPinRequirement?,
    _ verifier: some ChainVerifier, _ time: Date
  ) -> TrustDecision {
    let decision = evaluateStatic(chain, host: host, policy: policy, verifier: verifier, at: time)
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

  /// AFSecurityPolicy, then the ATS identities on the chain as built.
  private static func evaluateStatic(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, verifier: some ChainVerifier,
    at time: Date
  ) -> TrustDecision {
    var policyChain: ChainVerification?
    let decision = TrustEvaluator.evaluate(
      chain, host: host, policy: policy, verifier: verifier, at: time, policyChain: &policyChain)
    guard decision.isTrusted,
      !policy.pinnedLeafPublicKeyHashes.isEmpty || !policy.pinnedCAPublicKeyHashes.isEmpty
    else { return decision }
    // The chain as built to the policy's anchors, as the evaluation built
    // it (only certificate mode with allowInvalidCertificates made none).
    // When the policy allows invalid certificates it may not verify; then
    // only the certificates joined to the leaf by signatures count
    // (`IdentityPinCheck`).
    let verification =
      policyChain
      ?? verifier.verify(
        chain, anchors: .policyAnchors,
        purpose: policy.validatesDomainName ? .serverAuthentication : .basicX509,
        at: time
      ) { _ in nil }
    if let failure = IdentityPinCheck.evaluate(verification, policy: policy) { return .rejected(failure) }
    return decision
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
