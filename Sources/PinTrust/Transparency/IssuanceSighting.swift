import Foundation

/// A certificate a Certificate Transparency monitor saw issued for a name
/// that a rule pins, as facts: its key, its fingerprint, and what the
/// monitor's file said of the certificates above it. Every publicly trusted
/// certificate is logged before it is served (RFC 6962 §3), so judging a
/// sighting against the pins tells, before the renewal is deployed, whether
/// the clients pinned by this rule would accept it.
public struct IssuanceSighting: Sendable, Equatable {
  /// The DNS names the certificate is for, lowercased.
  public var names: [String]
  /// SHA-256 of the leaf's SubjectPublicKeyInfo.
  public var leafKey: Digest256
  /// SHA-256 of the certificate's DER (a precertificate's own).
  public var certificate: Digest256
  /// What makes two sightings one certificate: the TBSCertificate's SHA-256
  /// when the monitor gives it (a precertificate and its certificate share
  /// it), else `certificate`.
  public var identity: Digest256
  /// SHA-256 of the SPKI of each certificate above the leaf in the file,
  /// nearest first; nil when the file carried no chain (issuer unknown).
  public var issuerKeys: [Digest256]?
  /// SHA-256 of each certificate above the leaf in the file.
  public var issuerCertificates: [Digest256]
  /// The issuer's distinguished name, as the monitor or the file gives it.
  public var issuer: String
  public var notBefore: Date?
  public var notAfter: Date?
  /// When the hook recorded it.
  public var seen: Date

  public init(
    names: [String], leafKey: Digest256, certificate: Digest256, identity: Digest256? = nil,
    issuerKeys: [Digest256]?, issuerCertificates: [Digest256] = [], issuer: String, notBefore: Date? = nil,
    notAfter: Date? = nil, seen: Date
  ) {
    self.names = names
    self.leafKey = leafKey
    self.certificate = certificate
    self.identity = identity ?? certificate
    self.issuerKeys = issuerKeys
    self.issuerCertificates = issuerCertificates
    self.issuer = issuer
    self.notBefore = notBefore
    self.notAfter = notAfter
    self.seen = seen
  }

  /// How a rule's pins meet this certificate.
  public enum Verdict: Sendable, Equatable {
    /// The rule enforces no pin here (none configured, or `pinsExpire` passed).
    case notPinned
    /// Every pin requirement of the rule is met: deploying it is safe.
    case covered
    /// Some requirement is not met, each reason one sentence: clients pinned
    /// by the rule would refuse this certificate.
    case unpinned([String])
  }

  /// Judges the sighting against a rule's static pins and, when the rule
  /// has one, its dynamic list's fingerprints, at `time` (pins past
  /// `pinsExpire` are not enforced, so they flag nothing). The same
  /// requirements as the trust evaluation: each configured kind of pin must
  /// be met, and a dynamic list by certificate fingerprint.
  public func judge(_ policy: SecurityPolicy, dynamicList: [Digest256]?, at time: Date) -> Verdict {
    let staticPins = policy.hasStaticPins && !(policy.pinsExpire.map { $0 <= time } ?? false)
    guard staticPins || dynamicList != nil else { return .notPinned }
    var reasons: [String] = []
    let chainCertificates = [certificate] + issuerCertificates
    if staticPins {
      switch policy.pinningMode {
      case .none: break
      case .publicKey:
        let pins = Set(policy.expectedPublicKeyPins)
        if !([leafKey] + (issuerKeys ?? [])).contains(where: pins.contains) {
          reasons.append(
            issuerKeys == nil
              ? "no pin covers the leaf key, and the issuer is unknown (the certificate file carries no chain)"
              : "no pin covers the leaf key or a key of its chain")
        }
      case .certificate:
        let pinned = Set(policy.pinnedCertificates.map(\.fingerprint))
        if !chainCertificates.contains(where: pinned.contains) {
          reasons.append("no pinned certificate is in its chain (pinningMode certificate)")
        }
      }
      if !policy.pinnedLeafPublicKeyHashes.isEmpty, !policy.pinnedLeafPublicKeyHashes.contains(leafKey) {
        reasons.append("the leaf key is not among pinnedLeafPublicKeyHashes")
      }
      if !policy.pinnedCAPublicKeyHashes.isEmpty {
        if let issuerKeys {
          if !issuerKeys.contains(where: policy.pinnedCAPublicKeyHashes.contains) {
            reasons.append("no key of its chain above the leaf is among pinnedCAPublicKeyHashes")
          }
        } else {
          reasons.append(
            "issuer unknown: the certificate file carries no chain, so pinnedCAPublicKeyHashes cannot be met")
        }
      }
    }
    if let dynamicList, !chainCertificates.contains(where: dynamicList.contains) {
      reasons.append("no certificate of its chain is on the dynamic pin list (by fingerprint)")
    }
    return reasons.isEmpty ? .covered : .unpinned(reasons)
  }
}

extension Digest256 {
  /// Parses 64 hex digits (either case; colons between pairs allowed), as
  /// CT monitors print digests.
  public init?(hex text: String) {
    let digits = text.unicodeScalars.filter { $0 != ":" }
    guard digits.count == 64 else { return nil }
    var bytes: [UInt8] = []
    var high: UInt8?
    for scalar in digits {
      guard scalar.isASCII, let value = UInt8(String(scalar), radix: 16) else { return nil }
      if let first = high {
        bytes.append(first << 4 | value)
        high = nil
      } else {
        high = value
      }
    }
    self.init(bytes: bytes)
  }

  /// Lowercase hex without separators (Cert Spotter's form).
  public var lowercaseHex: String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0f)]] })
  }
}
