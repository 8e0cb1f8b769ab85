import Foundation

/// A certificate as a value: what the trust decision needs, extracted once by
/// the TLS layer (which owns the parser) and never re-derived. Both digests are
/// computed once per certificate when it is parsed, not per comparison.
public struct Certificate: Sendable, Hashable, CustomStringConvertible {
  /// The DER encoding, exactly as received or loaded.
  public let der: [UInt8]
  /// SHA-256 of `der`: "byte-identical" comparisons use this digest.
  public let fingerprint: Digest256
  /// SHA-256 of the DER SubjectPublicKeyInfo: the value of an SPKI pin.
  public let spkiFingerprint: Digest256
  /// RFC 2253 one-line forms, for people reading logs.
  public let subject: String
  public let issuer: String
  public let commonName: String?
  /// subjectAltName dNSName entries as written in the certificate.
  public let dnsNames: [String]
  /// subjectAltName iPAddress entries.
  public let ipAddresses: [IPAddress]
  public let notBefore: Date
  public let notAfter: Date
  public let publicKey: PublicKeyDescription
  /// The signature algorithm's short name (e.g. `sha256WithRSAEncryption`).
  public let signatureAlgorithm: String
  /// What the profile checks read (`ChainProfile`).
  public let profile: CertificateProfile

  public init(
    der: [UInt8], fingerprint: Digest256, spkiFingerprint: Digest256, subject: String, issuer: String,
    commonName: String?, dnsNames: [String], ipAddresses: [IPAddress], notBefore: Date, notAfter: Date,
    publicKey: PublicKeyDescription, signatureAlgorithm: String, profile: CertificateProfile
  ) {
    self.der = der
    self.fingerprint = fingerprint
    self.spkiFingerprint = spkiFingerprint
    self.subject = subject
    self.issuer = issuer
    self.commonName = commonName
    self.dnsNames = dnsNames
    self.ipAddresses = ipAddresses
    self.notBefore = notBefore
    self.notAfter = notAfter
    self.publicKey = publicKey
    self.signatureAlgorithm = signatureAlgorithm
    self.profile = profile
  }

  /// The pin for this certificate's key, `sha256/BASE64`.
  public var spkiPin: String { SPKIPin.prefix + spkiFingerprint.base64 }

  public var description: String { subject }

  public static func == (lhs: Certificate, rhs: Certificate) -> Bool { lhs.fingerprint == rhs.fingerprint }
  public func hash(into hasher: inout Hasher) { hasher.combine(fingerprint) }
}

/// The kind and size of a certificate's public key (ATS strength rules need both).
public struct PublicKeyDescription: Sendable, Hashable, CustomStringConvertible {
  public enum Algorithm: String, Sendable { case rsa, ec, ed25519, ed448, dsa, other }
  public let algorithm: Algorithm
  public let bits: Int
  /// For EC keys, the named curve: `P-256`, `P-384`, `P-521`, or OpenSSL's
  /// short name for any other (`secp256k1`, `brainpoolP256r1`).
  public let curve: String?

  public init(algorithm: Algorithm, bits: Int, curve: String? = nil) {
    self.algorithm = algorithm
    self.bits = bits
    self.curve = curve
  }

  public var description: String {
    "\(algorithm.rawValue.uppercased())-\(bits)" + (curve.map { " (\($0))" } ?? "")
  }
}
