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
  /// An ATS identity list (`IdentityPinCheck`) matched nothing: `seen` is
  /// the leaf for the leaf list, the certificates above it for the CA list.
  case identityPinMismatch(list: IdentityPinList, expected: [Digest256], seen: [Certificate])
  /// Fewer valid SCTs from distinct known logs than the rule requires.
  case certificateTransparency(TransparencyShortfall)
  /// The dynamic pin list has entries for the leaf (or names the leaf may
  /// have) and the leaf is not among them.
  case dynamicPinsUntrusted(commonName: String?, fingerprint: Digest256, mismatch: DynamicPinMismatch)
  /// The dynamic pin list has no unexpired entry that could apply.
  case dynamicPinsEmpty(commonName: String?, source: PinList.Source, total: Int, usable: Int)
  /// A valid CRL or OCSP response lists the certificate as revoked.
  case revoked(Certificate, RevocationEntry, by: EvidenceOrigin)
  /// Revocation information the rule (or a must-staple leaf) requires is
  /// missing or not valid; the text says which and why.
  case revocationUnknown(Certificate, String)
  /// The decision waits for revocation information from the network
  /// (`RevocationVerdict.needs`). The daemon fetches and decides again; should
  /// it ever reach a client it refuses, as a missing answer would.
  case revocationPending([RevocationFetch])

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
    case .pinMismatch, .identityPinMismatch: return .pinMismatch
    case .certificateTransparency: return .ctRequired
    case .emptyChain: return .untrustedChain
    case .dynamicPinsUntrusted: return .dynamicPinsUntrusted
    case .dynamicPinsEmpty: return .dynamicPinsEmpty
    case .revoked: return .revoked
    case .revocationUnknown, .revocationPending: return .revocationUnknown
    }
  }

  /// A failure of the pins (static or dynamic) rather than of the chain,
  /// the host or the transport: what report-only (`report.enforce: false`) waives.
  public var isPinFailure: Bool {
    switch code {
    case .pinMismatch, .noPins, .dynamicPinsUntrusted, .dynamicPinsEmpty: return true
    default: return false
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
    case .identityPinMismatch(let list, let expected, let seen):
      let want = expected.map { SPKIPin.format($0) }.joined(separator: ", ")
      let got = seen.map { "\($0.subject) \($0.spkiPin)" }.joined(separator: "; ")
      switch list {
      case .leaf:
        return "the leaf's public key is not in \(list.rawValue) [\(want)]; the leaf is [\(got)]"
      case .certificateAuthority:
        return "no certificate above the leaf in the chain as built has a public key in \(list.rawValue)"
          + " [\(want)]; above the leaf are [\(got)]"
      }
    case .certificateTransparency(let shortfall):
      return shortfall.reason
    case .dynamicPinsUntrusted(let name, let fingerprint, .unexpectedName(let expected)):
      return "leaf common name \(name.map { "\"\($0)\"" } ?? "(none)") is not among the dynamic pin list's"
        + " expectedCommonNames [\(expected.joined(separator: ", "))] (certificate sha256 \(fingerprint.base64))"
    case .dynamicPinsUntrusted(let name, let fingerprint, .noMatchingEntry(let entries)):
      let listed = entries.prefix(8).map {
        "sha256 \($0.fingerprint.base64) until \(TrustFailure.day($0.expires))"
      }
      return
        "leaf \(name ?? "(no common name)") has certificate sha256 \(fingerprint.base64), which is not in"
        + " the dynamic pin list; its \(entries.count) unexpired entries for that name are [\(listed.joined(separator: "; "))]"
    case .dynamicPinsEmpty(let name, let source, let total, let usable):
      if source == .none {
        return "no dynamic pin list was fetched, stored or configured as a fallback yet, so nothing can match"
      }
      return
        "the dynamic pin list (\(source.rawValue), \(total) entries, \(usable) unexpired) has no unexpired"
        + " entry for \(name.map { "\"\($0)\"" } ?? "a leaf without a common name")"
    case .revoked(let certificate, let entry, let origin):
      let why = entry.reason.map { " (\($0))" } ?? ""
      return "certificate \(certificate.subject) issued by \(certificate.issuer) was revoked at"
        + " \(RevocationCheck.instant(entry.time))\(why) according to \(origin)"
    case .revocationUnknown(let certificate, let why):
      return "revocation status of \(certificate.subject) is unknown: \(why)"
    case .revocationPending(let fetches):
      return
        "revocation information was not fetched in time: \(fetches.map(\.description).joined(separator: ", "))"
    }
  }
}

extension TrustFailure {
  /// A calendar day in UTC, for reasons and notices (`2027-06-01`).
  public static func day(_ date: Date) -> String {
    let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
    let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
    // Civil-from-days (Howard Hinnant's algorithm): no calendar object, no locale.
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let day = doy - (153 * mp + 2) / 5 + 1
    let month = mp < 10 ? mp + 3 : mp - 9
    let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(year)-\(two(month))-\(two(day))"
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
    /// The static policy accepted on `under`, and the chain matched this
    /// dynamic pin list entry.
    indirect case dynamicPin(PinListEntry, under: Basis)
  }

  public var basis: Basis
  /// The failure `allowInvalidCertificates` let through, if the chain had one.
  public var waived: ChainFailure?
  /// Report-only (`report.enforce: false`): the pin failure that would have
  /// refused the chain. Such an acceptance is logged as "would have refused"
  /// and reported, and never cached.
  public var waivedPinFailure: TrustFailure?
  /// Set when the rule's static pins expired (`pinsExpire`) and the chain was
  /// accepted without them: the fail-open both TrustKit and Android choose.
  public var pinsExpired: Date?
  /// The decision holds until this instant at most (the earliest notAfter of
  /// the certificates it relied on; `.distantFuture` when dates were not enforced).
  public var validUntil: Date
  /// The path the decision relied on, leaf first, as built (only the
  /// certificates joined to the leaf by verified signatures when the chain
  /// itself did not verify): what the revocation check examines.
  public var path: [Certificate] = []
  /// An OCSP check `ocsp: softFail` let through without a conclusive answer.
  public var revocationSoftFailure: String?

  public init(
    basis: Basis, waived: ChainFailure? = nil, waivedPinFailure: TrustFailure? = nil, validUntil: Date
  ) {
    self.basis = basis
    self.waived = waived
    self.waivedPinFailure = waivedPinFailure
    self.validUntil = validUntil
  }
}

/// The outcome of evaluating a chain for a host under a policy.
///
/// Indirect: an acceptance or a failure is a large value, and a decision is
/// one reference to it. The fingerprint cache stores the decision itself,
/// so a hit hands out that reference (one retain) instead of copying an
/// acceptance field by field; a full evaluation pays one box, next to its
/// chain building and signature checks.
public indirect enum TrustDecision: Sendable, Equatable {
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
