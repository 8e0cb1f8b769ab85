import Foundation

/// Which trust anchors a chain is built to.
public enum AnchorSource: Sendable, Equatable {
  /// The union of the policy's anchor sets (for `system`, the OS store).
  case policyAnchors
  /// The policy's pinned certificates only, each a trust point even when it is
  /// a leaf or an intermediate (partial chains allowed).
  case pinnedCertificates
}

/// The X.509 policy applied while verifying (SecPolicyCreateSSL vs BasicX509).
public enum VerificationPurpose: Sendable, Equatable {
  /// Chain, dates and signatures, plus serverAuth extended key usage.
  case serverAuthentication
  /// Chain, dates and signatures only: no usage, no host.
  case basicX509
}

/// What verifying a chain found. `builtChain` is the chain as built, leaf first,
/// which may include an anchor the server did not send; on failure it holds as
/// much of the chain as could be built.
public struct ChainVerification: Sendable {
  public var builtChain: [Certificate]
  /// nil when the chain verified.
  public var failure: ChainFailure?
  /// How many certificates, from the leaf up, are joined by verified
  /// signatures (each signed by the key of the next). The leaf always counts.
  /// Only these may match a public-key pin when the chain itself did not
  /// verify: a chain builder links certificates by name, and a forged leaf
  /// naming a pinned CA as its issuer must not borrow that CA's key.
  public var signatureLinkedCount: Int
  /// The anchor the path ends in came from the system store rather than a
  /// configured anchor set or a pinned certificate: the CA/Browser Forum
  /// rules apply to it (`ChainProfile`).
  public var endsInSystemStore: Bool

  public init(
    builtChain: [Certificate], failure: ChainFailure?, signatureLinkedCount: Int,
    endsInSystemStore: Bool = true
  ) {
    self.builtChain = builtChain
    self.failure = failure
    self.signatureLinkedCount = signatureLinkedCount
    self.endsInSystemStore = endsInSystemStore
  }

  public var isValid: Bool { failure == nil }
}

/// Why a chain did not verify.
public struct ChainFailure: Sendable, Equatable {
  public enum Kind: String, Sendable {
    case expired
    case notYetValid
    /// No path to any anchor (unknown issuer, self-signed, untrusted root).
    case untrusted
    case badSignature
    /// The leaf is not for TLS server authentication (extended key usage).
    case wrongPurpose
    /// A certificate acting as CA may not (basicConstraints, path length, usage).
    case invalidCA
    /// The certificate could not be parsed, or a date field is unreadable.
    case malformed
    /// The certificate breaks the RFC 5280 / CA/Browser Forum profile
    /// (`ChainProfile`): `malformed-certificate`.
    case profileViolation
    /// A CA's name constraints exclude the host, or do not permit it.
    case nameConstraints
    /// A key or signature below the ATS / CA/Browser Forum strength rules.
    case weakKey
    case other
  }

  public var kind: Kind
  /// Position in the chain as built (0 = leaf).
  public var depth: Int
  /// Subject of the certificate at `depth`, when known.
  public var subject: String?
  /// The verifier's own words (OpenSSL's error string).
  public var detail: String

  public init(kind: Kind, depth: Int, subject: String?, detail: String) {
    self.kind = kind
    self.depth = depth
    self.subject = subject
    self.detail = detail
  }
}

/// Builds and checks chains against anchors: the seam between the pure policy
/// logic and the X.509 library that does path building and signature checks.
/// The TLS layer implements it once per compiled policy (it owns the anchor
/// stores); PinTrust only decides what the answers mean.
public protocol ChainVerifier: Sendable {
  /// Builds a path from the leaf through the presented certificates to an
  /// anchor, and returns the first path that both verifies (names,
  /// signatures, basic constraints, usage; not dates, which `accept`
  /// checks) and passes `accept`. When a path fails, other candidate paths
  /// through the presented certificates are tried, within fixed bounds;
  /// when none passes, the result is the first path's failure.
  ///
  /// - Parameter accept: the further checks a verified path must pass, nil
  ///   when it passes (in practice `ChainProfile.violation`).
  func verify(
    _ chain: PresentedChain, anchors: AnchorSource, purpose: VerificationPurpose, at time: Date,
    accept: (ChainVerification) -> ChainFailure?
  ) -> ChainVerification

  /// The presented certificates as values, leaf first, as far as they parse
  /// (the dynamic pin check reads the leaf's CN and digest).
  func certificates(of chain: PresentedChain) -> [Certificate]
}
