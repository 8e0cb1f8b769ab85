import Foundation

/// Why a policy refused a chain. The failure keeps the facts; the sentence a
/// person reads (`reason`) is built only when someone asks for it, so a
/// refusal on the hot path costs no string formatting.
public enum TrustFailure: Sendable, Equatable, Error {
  /// AF's early reject: allowInvalid + validatesDomainName + a host, with no pins.
  case selfSignedRequiresPinning(host: TrustHost)
  /// The chain did not verify against the anchors named by `against`.
  case chainInvalid(ChainFailure, against: AnchorSource)
  /// The leaf's names do not cover the host.
  case hostnameMismatch(host: TrustHost, leaf: Certificate)
  /// Pinning mode is on but there is nothing to match.
  case noPins(PinningMode)
  /// No certificate (certificate mode) or key (publicKey mode) of the chain matched.
  case pinMismatch(mode: PinningMode, expected: [Digest256], seen: [Certificate])
  /// The server sent no certificate at all.
  case emptyChain

  public var code: FailureCode {
    switch self {
    case .selfSignedRequiresPinning: return .selfSignedRequiresPinning
    case .chainInvalid(let failure, let against):
      switch failure.kind {
      case .expired, .notYetValid: return .expired
      case .profileViolation: return .malformedCertificate
      case .weakKey: return .weakKey
      // Against the pinned certificates, "no path to an anchor" means the
      // chain leads to none of the pins.
      case .untrusted where against == .pinnedCertificates: return .pinMismatch
      default: return .untrustedChain
      }
    case .hostnameMismatch: return .hostnameMismatch
    case .noPins: return .noPins
    case .pinMismatch: return .pinMismatch
    case .emptyChain: return .untrustedChain
    }
  }

  /// One sentence naming the certificate, the check, and what was expected and seen.
  public var reason: String {
    switch self {
    case .selfSignedRequiresPinning(let host):
      return "policy for \(host) allows invalid certificates and validates the domain name but pins nothing;"
        + " validating a domain name for invalid certificates requires pinning (AFSecurityPolicy early reject)"
    case .chainInvalid(let failure, let against):
      let anchors = against == .policyAnchors ? "the policy's anchors" : "the pinned certificates"
      let subject = failure.subject.map { " (\($0))" } ?? ""
      let certificate = "certificate at depth \(failure.depth)\(subject)"
      switch failure.kind {
      case .profileViolation: return "\(certificate) is malformed: \(failure.detail)"
      case .weakKey: return "\(certificate) is too weak: \(failure.detail)"
      default: return "\(certificate) does not verify against \(anchors): \(failure.detail)"
      }
    case .hostnameMismatch(let host, let leaf):
      let names = leaf.dnsNames + leaf.ipAddresses.map(\.description)
      let listed =
        names.isEmpty ? "no subjectAltName entries" : "subjectAltName " + names.joined(separator: ", ")
      return
        "leaf \(leaf.subject) is not valid for \(host): it has \(listed) (the common name is not consulted)"
    case .noPins(let mode):
      return "pinning mode \(mode.rawValue) with an empty pin set matches nothing"
    case .pinMismatch(let mode, let expected, let seen):
      let want = expected.map { SPKIPin.format($0) }.joined(separator: ", ")
      let got = seen.map { certificate in
        let value = mode == .certificate ? "sha256 " + certificate.fingerprint.base64 : certificate.spkiPin
        return "\(certificate.subject) \(value)"
      }.joined(separator: "; ")
      let what = mode == .certificate ? "certificate" : "public key"
      return "no \(what) in the chain matches a pin; expected one of [\(want)], chain has [\(got)]"
    case .emptyChain:
      return "the server presented no certificate"
    }
  }
}

/// Why a chain was accepted. Any acceptance that waived a failed or skipped
/// check says so (`waived`), so logs can show that the policy allowed it.
public struct Acceptance: Sendable, Equatable {
  public enum Basis: Sendable, Equatable {
    /// The chain verified against the policy's anchors (and the host, when checked).
    case validChain
    /// A certificate of the chain as built equals a pinned certificate.
    case pinnedCertificate(Digest256)
    /// A certificate of the chain as built carries a pinned key.
    case pinnedPublicKey(Digest256)
    /// Mode none with `allowInvalidCertificates`: nothing was enforced.
    case invalidCertificatesAllowed
  }

  public var basis: Basis
  /// The failure `allowInvalidCertificates` let through, if the chain had one.
  public var waived: ChainFailure?
  /// The decision holds until this instant at most (the earliest notAfter of
  /// the certificates it relied on; `.distantFuture` when dates were not enforced).
  public var validUntil: Date

  public init(basis: Basis, waived: ChainFailure? = nil, validUntil: Date) {
    self.basis = basis
    self.waived = waived
    self.validUntil = validUntil
  }
}

/// The outcome of evaluating a chain for a host under a policy.
public enum TrustDecision: Sendable, Equatable {
  case trusted(Acceptance)
  case rejected(TrustFailure)

  public var isTrusted: Bool {
    if case .trusted = self { return true }
    return false
  }

  /// `trusted` or `rejected: <code>: <reason>`, the CLI's contract.
  public var summary: String {
    switch self {
    case .trusted: return "trusted"
    case .rejected(let failure): return "rejected: \(failure.code.rawValue): \(failure.reason)"
    }
  }
}
