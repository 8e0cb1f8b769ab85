import Foundation

/// How a domain's server certificates are pinned (AFSSLPinningMode).
public enum PinningMode: String, Sendable, CaseIterable {
  /// No pinning: the chain must validate against the policy's anchors.
  case none
  /// Some certificate of the chain as built must be byte-identical to a pinned
  /// one, and the chain must validate with the pinned certificates as the only anchors.
  case certificate
  /// Some certificate of the chain as built must carry a pinned public key (SPKI).
  case publicKey
}

/// One domain's trust policy: AFSecurityPolicy's four knobs plus the anchor
/// sets that replace the iOS system store. A value: copying it copies the
/// policy, and two policies with the same settings are equal.
public struct SecurityPolicy: Sendable, Equatable {
  public var pinningMode: PinningMode
  /// Certificates for certificate mode; in publicKey mode their SPKIs are pins too (as in AF).
  public var pinnedCertificates: [Certificate]
  /// SPKI SHA-256 pins for publicKey mode, beside those of `pinnedCertificates`.
  public var pinnedPublicKeyHashes: [Digest256]
  /// Check the host against the leaf and require serverAuth usage (default true).
  public var validatesDomainName: Bool
  /// Accept chains that do not validate against the anchors (default false).
  /// In certificate mode it does not skip the evaluation against the pinned
  /// certificates; in publicKey mode the pin is then the only check.
  public var allowInvalidCertificates: Bool
  /// Names of the anchor sets whose union is trusted; `system` is the OS store.
  public var anchors: [String]
  /// False is report-only (`report.enforce: false`, TrustKit's
  /// `enforcePinning`): a pin failure is reported and the connection
  /// proceeds if the chain is otherwise valid (`RuleEvaluator`).
  public var enforcesPins: Bool
  /// ATS `NSPinnedLeafIdentities`: when not empty, the leaf's SPKI SHA-256
  /// must be one of these. Only ever tightens (`IdentityPinCheck`).
  public var pinnedLeafPublicKeyHashes: [Digest256]
  /// ATS `NSPinnedCAIdentities`: when not empty, some certificate above the
  /// leaf in the chain as built must carry one of these keys.
  public var pinnedCAPublicKeyHashes: [Digest256]
  /// TrustKit's `expirationDate`, Android's `<pin-set expiration>`: from this
  /// instant the static pins (pin mode and identities) are no longer
  /// enforced. Both platforms fail open on purpose (`RuleEvaluator`).
  public var pinsExpire: Date?
  /// The rule's `revocation` settings (`RevocationCheck`).
  public var revocation: RevocationSettings = .default

  public static let systemAnchors = "system"

  public init(
    pinningMode: PinningMode = .none, pinnedCertificates: [Certificate] = [],
    pinnedPublicKeyHashes: [Digest256] = [], validatesDomainName: Bool = true,
    allowInvalidCertificates: Bool = false, anchors: [String] = [SecurityPolicy.systemAnchors],
    enforcesPins: Bool = true, pinnedLeafPublicKeyHashes: [Digest256] = [],
    pinnedCAPublicKeyHashes: [Digest256] = [], pinsExpire: Date? = nil
  ) {
    self.pinningMode = pinningMode
    self.pinnedCertificates = pinnedCertificates
    self.pinnedPublicKeyHashes = pinnedPublicKeyHashes
    self.validatesDomainName = validatesDomainName
    self.allowInvalidCertificates = allowInvalidCertificates
    self.anchors = anchors
    self.enforcesPins = enforcesPins
    self.pinnedLeafPublicKeyHashes = pinnedLeafPublicKeyHashes
    self.pinnedCAPublicKeyHashes = pinnedCAPublicKeyHashes
    self.pinsExpire = pinsExpire
  }

  /// AFSecurityPolicy's `defaultPolicy`: no pinning, invalid certificates refused,
  /// domain names validated, system anchors.
  public static var `default`: SecurityPolicy { SecurityPolicy() }

  /// The number of pins the current mode would match against.
  public var pinCount: Int {
    switch pinningMode {
    case .none: return 0
    case .certificate: return pinnedCertificates.count
    case .publicKey: return pinnedCertificates.count + pinnedPublicKeyHashes.count
    }
  }

  /// Whether the rule pins statically: a pin mode, or ATS identities.
  /// These are what `pinsExpire` stops enforcing.
  public var hasStaticPins: Bool {
    pinningMode != .none || !pinnedLeafPublicKeyHashes.isEmpty || !pinnedCAPublicKeyHashes.isEmpty
  }

  /// The policy once its static pins expired: no pin mode, no identities,
  /// and the chain has to carry the decision on its own: a rule that pinned
  /// loses `allowInvalidCertificates` (the pin is what made an invalid chain
  /// acceptable) and validates the host again (a pin may be what made
  /// skipping the host acceptable), as TrustKit and Android fall back to the
  /// platform's default evaluation, host check included.
  public var withoutStaticPins: SecurityPolicy {
    var unpinned = self
    if hasStaticPins {
      unpinned.allowInvalidCertificates = false
      unpinned.validatesDomainName = true
    }
    unpinned.pinningMode = .none
    unpinned.pinnedCertificates = []
    unpinned.pinnedPublicKeyHashes = []
    unpinned.pinnedLeafPublicKeyHashes = []
    unpinned.pinnedCAPublicKeyHashes = []
    unpinned.pinsExpire = nil
    return unpinned
  }

  /// Every SPKI pin publicKey mode accepts, for reasons and `/policies`.
  public var expectedPublicKeyPins: [Digest256] {
    pinnedCertificates.map(\.spkiFingerprint) + pinnedPublicKeyHashes
  }
}
