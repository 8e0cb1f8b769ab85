/// A rule's `revocation` key: how hard to look for revocation information
/// beyond the evidence already at hand (a stapled response, the anchor
/// set's CRLs), which always counts whatever these say.
public struct RevocationSettings: Sendable, Hashable {
  /// CRL distribution points (RFC 5280 §4.2.1.13).
  public enum CRLMode: String, Sendable, CaseIterable {
    /// Only CRLs configured on the anchor set are consulted.
    case off
    /// Each certificate's distribution points are fetched too; a missing
    /// CRL is no reason to refuse.
    case ifAvailable
    /// Every issuer on the path must have a valid CRL (configured or fetched).
    case require
  }

  /// OCSP queries to the leaf's responder (RFC 6960).
  public enum OCSPMode: String, Sendable, CaseIterable {
    case off
    /// No conclusive answer is accepted, and counted.
    case softFail
    /// No conclusive answer refuses (`revocation-unknown`).
    case hardFail
  }

  /// The stapled response (RFC 6066 §8).
  public enum StapleMode: String, Sendable, CaseIterable {
    /// A valid staple is honoured; an invalid or stale one is ignored.
    case check
    /// A valid, good staple is required for every leaf.
    case require
  }

  public var crl: CRLMode
  public var ocsp: OCSPMode
  public var stapledOCSP: StapleMode

  public init(crl: CRLMode = .off, ocsp: OCSPMode = .off, stapledOCSP: StapleMode = .check) {
    self.crl = crl
    self.ocsp = ocsp
    self.stapledOCSP = stapledOCSP
  }

  /// `crl: off, ocsp: off, stapledOCSP: check`.
  public static let `default` = RevocationSettings()

  /// Whether the check may go to the network for more evidence.
  public var fetches: Bool { crl != .off || ocsp != .off }

  /// `crl=off ocsp=off stapledOCSP=check`, for `/policies` and logs.
  public var summary: String {
    "crl=\(crl.rawValue) ocsp=\(ocsp.rawValue) stapledOCSP=\(stapledOCSP.rawValue)"
  }
}
