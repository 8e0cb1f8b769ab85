import Foundation

/// AFSecurityPolicy's `evaluateServerTrust:forDomain:`, step for step
/// (docs/TRUST.md, trust evaluation), over a `ChainVerifier` for the X.509 work.
///
/// Pure: no I/O, no clock of its own (`time` is the evaluation instant).
public enum TrustEvaluator {
  public static func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, verifier: some ChainVerifier,
    at time: Date
  ) -> TrustDecision {
    var unused: ChainVerification?
    return evaluate(chain, host: host, policy: policy, verifier: verifier, at: time, policyChain: &unused)
  }

  /// The evaluation, also handing back the verification against the
  /// policy's anchors when it made one (every mode but certificate mode
  /// with `allowInvalidCertificates`), so that a later step reads the chain
  /// as built instead of building it again (`RuleEvaluator`'s identities).
  static func evaluate(
    _ chain: PresentedChain, host: TrustHost?, policy: SecurityPolicy, verifier: some ChainVerifier,
    at time: Date, policyChain: inout ChainVerification?
  ) -> TrustDecision {
    guard !chain.isEmpty else { return .rejected(.emptyChain) }

    // 1. The early reject: "to validate a domain name for self-signed
    // certificates you must pin". It fires even for a valid certificate.
    if let host, policy.allowInvalidCertificates, policy.validatesDomainName,
      policy.pinningMode == .none || policy.pinCount == 0
    {
      return .rejected(.selfSignedRequiresPinning(host: host))
    }

    // 2. Server policy with the host (or none when the host is absent), or basic X.509.
    let check = ServerTrustCheck(
      chain: chain, purpose: policy.validatesDomainName ? .serverAuthentication : .basicX509,
      host: policy.validatesDomainName ? host : nil, verifier: verifier, time: time,
      checksStrength: !policy.allowInvalidCertificates)

    // 3. Mode none: allowInvalid, or valid server trust.
    if policy.pinningMode == .none {
      let (verification, failure) = check.run(anchors: .policyAnchors)
      policyChain = verification
      // A chain that does not even parse is refused whatever the policy allows.
      if let failure, verification.builtChain.isEmpty { return .rejected(failure) }
      if let failure {
        guard policy.allowInvalidCertificates else { return .rejected(failure) }
        // Accepted on a failed check because the policy explicitly allows
        // invalid certificates (AF: `allowInvalidCertificates || valid`).
        var acceptance = Acceptance(
          basis: .invalidCertificatesAllowed, waived: verification.failure, validUntil: .distantFuture)
        acceptance.path = linkedPath(verification)
        return .trusted(acceptance)
      }
      var acceptance = Acceptance(basis: .validChain, validUntil: earliestExpiry(verification.builtChain))
      acceptance.path = verification.builtChain
      return .trusted(acceptance)
    }

    // 4. Pinning modes: without allowInvalid the chain must first be valid
    // against the policy's anchors. allowInvalid skips only this step.
    var anchoredChain: ChainVerification?
    if !policy.allowInvalidCertificates {
      let (verification, failure) = check.run(anchors: .policyAnchors)
      policyChain = verification
      if let failure { return .rejected(failure) }
      anchoredChain = verification
    }

    switch policy.pinningMode {
    case .none:
      preconditionFailure("mode none returned above")
    case .certificate:
      return evaluateCertificatePins(policy: policy, check: check)
    case .publicKey:
      return evaluatePublicKeyPins(
        policy: policy, check: check, anchoredChain: anchoredChain, policyChain: &policyChain)
    }
  }

  /// 5. The pinned certificates become the only anchors and the chain is
  /// evaluated again (dates, host and usage enforced even with allowInvalid);
  /// then some certificate of the chain as built must equal a pinned one.
  private static func evaluateCertificatePins(policy: SecurityPolicy, check: ServerTrustCheck)
    -> TrustDecision
  {
    guard !policy.pinnedCertificates.isEmpty else { return .rejected(.noPins(.certificate)) }
    let (verification, failure) = check.run(anchors: .pinnedCertificates)
    if let failure { return .rejected(failure) }
    for certificate in verification.builtChain.reversed() {
      if let pin = firstMatch(certificate.fingerprint, in: policy.pinnedCertificates.map(\.fingerprint)) {
        var acceptance = Acceptance(
          basis: .pinnedCertificate(pin), validUntil: earliestExpiry(verification.builtChain))
        acceptance.path = verification.builtChain
        return .trusted(acceptance)
      }
    }
    return .rejected(
      .pinMismatch(
        mode: .certificate, expected: policy.pinnedCertificates.map(\.fingerprint),
        seen: verification.builtChain))
  }

  /// 6. Some certificate of the chain as built must carry a pinned key. When
  /// allowInvalid skipped step 4 nothing else is enforced, exactly as in AF,
  /// except that only certificates joined to the leaf by verified signatures
  /// may match (see `ChainVerification.signatureLinkedCount`).
  private static func evaluatePublicKeyPins(
    policy: SecurityPolicy, check: ServerTrustCheck, anchoredChain: ChainVerification?,
    policyChain: inout ChainVerification?
  ) -> TrustDecision {
    let expected = policy.expectedPublicKeyPins
    guard !expected.isEmpty else { return .rejected(.noPins(.publicKey)) }
    let verification = anchoredChain ?? check.verify(anchors: .policyAnchors)
    policyChain = verification
    // A chain that does not even parse is refused whatever the policy allows.
    if let failure = verification.failure, verification.builtChain.isEmpty {
      return .rejected(.chainInvalid(failure, against: .policyAnchors))
    }
    let candidates = verification.builtChain.prefix(max(1, verification.signatureLinkedCount))
    for certificate in candidates {
      if let pin = firstMatch(certificate.spkiFingerprint, in: expected) {
        // With allowInvalid the dates were not enforced, so the verdict has no
        // date-based horizon; otherwise it ends with the earliest notAfter.
        let horizon = anchoredChain.map { earliestExpiry($0.builtChain) } ?? .distantFuture
        var acceptance = Acceptance(
          basis: .pinnedPublicKey(pin), waived: verification.failure, validUntil: horizon)
        acceptance.path = linkedPath(verification)
        return .trusted(acceptance)
      }
    }
    return .rejected(.pinMismatch(mode: .publicKey, expected: expected, seen: Array(candidates)))
  }

  /// Compares against every pin in constant time per comparison and without
  /// stopping early, so timing does not reveal which pin matched.
  static func firstMatch(_ digest: Digest256, in pins: [Digest256]) -> Digest256? {
    var match: Digest256?
    for pin in pins where pin == digest && match == nil { match = pin }
    return match
  }

  /// The chain as built when it verified; otherwise only the certificates
  /// joined to the leaf by verified signatures.
  static func linkedPath(_ verification: ChainVerification) -> [Certificate] {
    verification.isValid
      ? verification.builtChain
      : Array(verification.builtChain.prefix(max(1, verification.signatureLinkedCount)))
  }

  static func earliestExpiry(_ chain: [Certificate]) -> Date {
    chain.map(\.notAfter).min() ?? .distantPast
  }
}

/// "Server trust is valid" for one anchor choice: a path verifies under the
/// purpose and passes the certificate profile (`ChainProfile`: dates,
/// RFC 5280 and CA/Browser Forum rules, name constraints on the host, key
/// strength), and the leaf matches the host when a host is checked.
struct ServerTrustCheck {
  let chain: PresentedChain
  let purpose: VerificationPurpose
  let host: TrustHost?
  let verifier: any ChainVerifier
  let time: Date
  /// False when the policy allows invalid certificates (see `KeyStrength`).
  let checksStrength: Bool

  func verify(anchors: AnchorSource) -> ChainVerification {
    verifier.verify(chain, anchors: anchors, purpose: purpose, at: time) { path in
      ChainProfile.violation(
        in: path.builtChain, host: host, at: time, checksStrength: checksStrength,
        publiclyTrusted: path.endsInSystemStore)
    }
  }

  func run(anchors: AnchorSource) -> (ChainVerification, TrustFailure?) {
    let verification = verify(anchors: anchors)
    if let failure = verification.failure {
      return (verification, .chainInvalid(failure, against: anchors))
    }
    if let host, let leaf = verification.builtChain.first, !HostnameMatcher.matches(leaf, host: host) {
      return (verification, .hostnameMismatch(host: host, leaf: leaf))
    }
    return (verification, nil)
  }
}
