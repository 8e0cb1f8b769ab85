import Foundation

/// The checks a verified path must also pass, beyond what OpenSSL's default
/// verifier enforces: validity dates (inclusive), the RFC 5280 and CA/Browser
/// Forum certificate profile, name constraints applied to the host itself,
/// and key and signature strength. One function, used by every evaluation,
/// so `pinproxy evaluate` and the daemon answer alike.
///
/// `chain` is a path as built, leaf first, whose last certificate is the
/// trust anchor it verified to (an anchor-set member, a system root or a
/// pinned certificate). What applies to that anchor is decided per rule and
/// written beside each rule (docs/TRUST.md, "Certificate profile").
public enum ChainProfile {
  /// The first violation, checked in this order: dates, profile, name
  /// constraints, strength. nil when the path passes.
  ///
  /// - Parameter checksStrength: false only when the policy allows invalid
  ///   certificates, which waived the ATS key rules before they joined the
  ///   evaluation and still does.
  /// - Parameter publiclyTrusted: the path ends in the system store, so the
  ///   CA/Browser Forum Baseline Requirements apply on top of RFC 5280.
  public static func violation(
    in chain: [Certificate], host: TrustHost?, at time: Date, checksStrength: Bool,
    publiclyTrusted: Bool = true
  ) -> ChainFailure? {
    if let failure = ValidityPeriod.violation(in: chain, at: time) { return failure }
    if let failure = ProfileRules.violation(in: chain, baselineRequirements: publiclyTrusted) {
      return failure
    }
    if let failure = NameConstraintCheck.violation(in: chain, host: host) { return failure }
    if checksStrength, let failure = KeyStrength.violation(in: chain) { return failure }
    return nil
  }

  static func failure(_ kind: ChainFailure.Kind, _ chain: [Certificate], _ depth: Int, _ detail: String)
    -> ChainFailure
  {
    ChainFailure(kind: kind, depth: depth, subject: chain[depth].subject, detail: detail)
  }
}

/// RFC 5280 §4.1.2.5: "The validity period for a certificate is the period
/// of time from notBefore through notAfter, inclusive." Checked here, to the
/// fraction of a second, rather than by OpenSSL, which takes whole seconds and
/// treats the notAfter second itself as expired.
enum ValidityPeriod {
  static func violation(in chain: [Certificate], at time: Date) -> ChainFailure? {
    for (depth, certificate) in chain.enumerated() {
      if time > certificate.notAfter {
        return ChainProfile.failure(.expired, chain, depth, "certificate has expired")
      }
      if time < certificate.notBefore {
        return ChainProfile.failure(.notYetValid, chain, depth, "certificate is not yet valid")
      }
    }
    return nil
  }
}
