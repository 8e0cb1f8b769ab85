/// Which ATS identity list a chain failed (`NSPinnedDomains`).
public enum IdentityPinList: String, Sendable, Equatable {
  /// `pinnedLeafPublicKeyHashes` (`NSPinnedLeafIdentities`).
  case leaf = "pinnedLeafPublicKeyHashes"
  /// `pinnedCAPublicKeyHashes` (`NSPinnedCAIdentities`).
  case certificateAuthority = "pinnedCAPublicKeyHashes"
}

/// ATS pinned identities: the leaf's key must be in the leaf list when one
/// is given, and some certificate above the leaf in the chain as built must
/// be in the CA list when one is given; both when both are. The check runs
/// after the AFSecurityPolicy evaluation accepted and can only refuse.
///
/// Only certificates joined to the leaf by verified signatures are
/// considered (`ChainVerification.signatureLinkedCount`): a chain builder
/// links by name, and a forged leaf that names a pinned CA as its issuer
/// must not borrow that CA's key.
///
/// Pure: it reads a verification the caller made.
public enum IdentityPinCheck {
  public static func evaluate(_ verification: ChainVerification, policy: SecurityPolicy) -> TrustFailure? {
    let linked =
      verification.isValid
      ? verification.builtChain[...]
      : verification.builtChain.prefix(max(1, verification.signatureLinkedCount))
    guard let leaf = linked.first else { return .emptyChain }
    let leafPins = policy.pinnedLeafPublicKeyHashes
    if !leafPins.isEmpty, TrustEvaluator.firstMatch(leaf.spkiFingerprint, in: leafPins) == nil {
      return .identityPinMismatch(list: .leaf, expected: leafPins, seen: [leaf])
    }
    let caPins = policy.pinnedCAPublicKeyHashes
    if !caPins.isEmpty {
      let authorities = Array(linked.dropFirst())
      let matched = authorities.contains { TrustEvaluator.firstMatch($0.spkiFingerprint, in: caPins) != nil }
      if !matched {
        return .identityPinMismatch(list: .certificateAuthority, expected: caPins, seen: authorities)
      }
    }
    return nil
  }
}
