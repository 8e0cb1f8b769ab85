import Foundation

/// Where a piece of revocation information came from.
public enum EvidenceOrigin: Sendable, Hashable, CustomStringConvertible {
  /// A CRL file the operator supplied (`anchorSets.NAME.crls`, `evaluate --crl`).
  case crlFile(String)
  /// A CRL fetched from a certificate's distribution point.
  case distributionPoint(String)
  /// The OCSP response the server stapled to its handshake.
  case staple
  /// An OCSP response fetched from the leaf's responder.
  case responder(String)
  /// An OCSP response file given to `evaluate --ocsp-response`.
  case responseFile(String)

  /// Supplied by the operator: such evidence is never ignored silently; when
  /// it applies and is not valid, the check refuses and says why.
  public var isSupplied: Bool {
    switch self {
    case .crlFile, .responseFile: return true
    default: return false
    }
  }

  /// The metric label: `crl`, `staple` or `ocsp`.
  public var source: String {
    switch self {
    case .crlFile, .distributionPoint: return "crl"
    case .staple: return "staple"
    case .responder, .responseFile: return "ocsp"
    }
  }

  public var description: String {
    switch self {
    case .crlFile(let path): return "the CRL \(path)"
    case .distributionPoint(let url): return "the CRL \(url)"
    case .staple: return "the stapled OCSP response"
    case .responder(let url): return "the OCSP responder \(url)"
    case .responseFile(let path): return "the OCSP response \(path)"
    }
  }
}

/// A revocation entry: when, and why when the issuer said.
public struct RevocationEntry: Sendable, Equatable {
  public var time: Date
  /// RFC 5280 §5.3.1 reason name (`keyCompromise`), nil when none was given.
  public var reason: String?

  public init(time: Date, reason: String?) {
    self.time = time
    self.reason = reason
  }
}

/// What one CRL or OCSP response, already decoded and checked by the TLS
/// layer (signature, signer, issuer, extensions), says about one certificate.
/// Its dates are judged here (`RevocationCheck`), against the evaluation's clock.
public struct RevocationFinding: Sendable, Equatable {
  public enum Verdict: Sendable, Equatable {
    /// A CRL that does not list the certificate, or an OCSP "good".
    case good
    case revoked(RevocationEntry)
    /// OCSP "unknown": the responder does not know the certificate.
    case unknown
    /// The CRL or response is not valid for this certificate (wrong
    /// signer, bad signature, missing CRLNumber, another certificate …).
    case defective(String)
  }

  public var origin: EvidenceOrigin
  public var verdict: Verdict
  public var thisUpdate: Date
  /// nil: an OCSP response without nextUpdate (a CRL without one is defective).
  public var nextUpdate: Date?

  public init(origin: EvidenceOrigin, verdict: Verdict, thisUpdate: Date, nextUpdate: Date?) {
    self.origin = origin
    self.verdict = verdict
    self.thisUpdate = thisUpdate
    self.nextUpdate = nextUpdate
  }

  /// A finding that could not even be dated.
  public static func defective(_ origin: EvidenceOrigin, _ why: String) -> RevocationFinding {
    RevocationFinding(origin: origin, verdict: .defective(why), thisUpdate: .distantPast, nextUpdate: nil)
  }
}

/// Something the check could learn from the network.
public enum RevocationFetch: Sendable, Hashable, CustomStringConvertible {
  /// A CRL distribution point (`http://` only); `issuer` is the DER
  /// certificate of the issuer that asked, so the CRL is verified off the
  /// event loop as it arrives.
  case crl(url: String, issuer: [UInt8])
  /// An OCSP query to `url` for one certificate; `request` is the DER
  /// OCSPRequest and `certID` the key its answer is cached under; `leaf` and
  /// `issuer` (DER) verify the answer before it replaces one held.
  case ocsp(url: String, request: [UInt8], certID: Digest256, leaf: [UInt8], issuer: [UInt8])

  public var url: String {
    switch self {
    case .crl(let url, _), .ocsp(let url, _, _, _, _): return url
    }
  }

  /// The DER OCSPRequest of an OCSP fetch (empty for a CRL).
  public var request: [UInt8] {
    if case .ocsp(_, let request, _, _, _) = self { return request }
    return []
  }

  public var description: String {
    switch self {
    case .crl(let url, _): return "CRL \(url)"
    case .ocsp(let url, _, _, _, _): return "OCSP \(url)"
    }
  }
}

/// Where a piece of evidence the network could give stands.
public enum FetchState: Sendable, Equatable {
  /// Not asked for yet, or being fetched by another connection.
  case wanted(RevocationFetch)
  /// Asked for recently, without a usable answer.
  case failed(String)
}

/// Everything the TLS layer found about the revocation of a path.
public struct PathRevocationEvidence: Sendable, Equatable {
  /// For each certificate of the path examined (all but the anchor of an
  /// anchored path, which no issuer on the path can revoke), the CRLs that cover it.
  public var crls: [[RevocationFinding]]
  /// For each such certificate, the distribution points without a usable
  /// CRL (only when the rule fetches CRLs).
  public var distributionPoints: [[FetchState]]
  /// The staple, when the server sent one.
  public var staple: RevocationFinding?
  /// The leaf's responder: nil when the rule does not query OCSP, when the
  /// leaf names no responder, or without an issuer to name the leaf by.
  public var responder: ResponderEvidence?
  /// The leaf carries the TLS Feature `status_request` (RFC 7633).
  public var mustStaple: Bool

  public init(
    crls: [[RevocationFinding]] = [], distributionPoints: [[FetchState]] = [],
    staple: RevocationFinding? = nil,
    responder: ResponderEvidence? = nil, mustStaple: Bool = false
  ) {
    self.crls = crls
    self.distributionPoints = distributionPoints
    self.staple = staple
    self.responder = responder
    self.mustStaple = mustStaple
  }
}

/// The leaf's OCSP responder, as far as it is known.
public enum ResponderEvidence: Sendable, Equatable {
  case answer(RevocationFinding)
  case pending(FetchState)
}

/// The seam to the TLS layer, which decodes and verifies CRLs and OCSP
/// responses (as `ChainVerifier` is for paths). PinTrust only decides what
/// the findings mean.
public protocol RevocationSource: Sendable {
  /// What is known about `path` (leaf first, as built).
  /// - Parameters:
  ///   - anchored: the path verified and ends in its anchor, which nothing
  ///     on it revokes; false (a chain accepted under
  ///     `allowInvalidCertificates`): its last certificate is examined too.
  ///   - staple: the DER OCSP response the server stapled, if any.
  ///   - fetching: whether evidence the network could give should be asked
  ///     for (`FetchState.wanted`); false decides with what is at hand.
  func evidence(
    for path: [Certificate], anchored: Bool, staple: [UInt8]?, settings: RevocationSettings, fetching: Bool,
    at time: Date
  ) -> PathRevocationEvidence
}

/// The revocation part of an evaluation: the source, the rule's settings,
/// and what this handshake brought.
public struct RevocationInput: Sendable {
  public var source: any RevocationSource
  public var settings: RevocationSettings
  public var staple: [UInt8]?
  /// False when the network may not be asked (offline `evaluate`, the
  /// second round after a fetch).
  public var fetching: Bool

  public init(source: any RevocationSource, settings: RevocationSettings, staple: [UInt8]?, fetching: Bool) {
    self.source = source
    self.settings = settings
    self.staple = staple
    self.fetching = fetching
  }
}
