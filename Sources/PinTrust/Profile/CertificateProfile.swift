/// The structural facts of a certificate that the RFC 5280 and CA/Browser
/// Forum profile checks read (`ChainProfile`). The TLS layer extracts them
/// once, with the parser it owns, when it turns a certificate into a value;
/// the checks themselves are pure.
public struct CertificateProfile: Sendable, Hashable {
  /// basicConstraints as found (RFC 5280 §4.2.1.9).
  public struct BasicConstraints: Sendable, Hashable {
    public var isCA: Bool
    public var critical: Bool
    public init(isCA: Bool, critical: Bool) {
      self.isCA = isCA
      self.critical = critical
    }
  }

  /// nameConstraints as found (RFC 5280 §4.2.1.10). A subtree list is nil
  /// when absent; an empty list was present with no entries (malformed:
  /// `GeneralSubtrees ::= SEQUENCE SIZE (1..MAX)`).
  public struct NameConstraints: Sendable, Hashable {
    public var critical: Bool
    public var permitted: [Subtree]?
    public var excluded: [Subtree]?
    public init(critical: Bool, permitted: [Subtree]?, excluded: [Subtree]?) {
      self.critical = critical
      self.permitted = permitted
      self.excluded = excluded
    }
  }

  /// One GeneralSubtree base: only dNSName values are read as text; other
  /// name forms are kept by kind so a permitted list of IP ranges alone
  /// leaves DNS names unconstrained, as RFC 5280 §4.2.1.10 says.
  public enum Subtree: Sendable, Hashable {
    case dnsName(String)
    case other
  }

  /// X.509 version number as written: 1, 2 or 3.
  public var version: Int
  public var extensionCount: Int
  public var basicConstraints: BasicConstraints?
  /// keyUsage keyCertSign asserted.
  public var assertsKeyCertSign: Bool
  public var hasSubjectKeyIdentifier: Bool
  /// nil when there is no authorityKeyIdentifier; otherwise whether it holds a keyIdentifier.
  public var authorityKeyIdentifierHasKeyID: Bool?
  /// nil when there is no subjectAltName; otherwise its criticality.
  public var subjectAltNameCritical: Bool?
  /// The subject DN has no attributes at all.
  public var subjectIsEmpty: Bool
  /// nil when there is no policyConstraints; otherwise its criticality.
  public var policyConstraintsCritical: Bool?
  public var nameConstraints: NameConstraints?
  /// One line per extension whose contents do not decode as strict DER of
  /// their type, or that appears twice (RFC 5280 §4.2), e.g.
  /// `authorityInfoAccess: not valid DER`.
  public var malformedExtensions: [String]
  /// Subject equals issuer and the certificate's signature verifies under its own key.
  public var isSelfSigned: Bool
  /// The digest of the certificate's signature in lower case (`sha256`,
  /// `sha1`, `md5`), nil when the algorithm names none (EdDSA, RSA-PSS).
  public var signatureDigest: String?

  public init(
    version: Int, extensionCount: Int, basicConstraints: BasicConstraints?, assertsKeyCertSign: Bool,
    hasSubjectKeyIdentifier: Bool, authorityKeyIdentifierHasKeyID: Bool?, subjectAltNameCritical: Bool?,
    subjectIsEmpty: Bool, policyConstraintsCritical: Bool?, nameConstraints: NameConstraints?,
    malformedExtensions: [String], isSelfSigned: Bool, signatureDigest: String?
  ) {
    self.version = version
    self.extensionCount = extensionCount
    self.basicConstraints = basicConstraints
    self.assertsKeyCertSign = assertsKeyCertSign
    self.hasSubjectKeyIdentifier = hasSubjectKeyIdentifier
    self.authorityKeyIdentifierHasKeyID = authorityKeyIdentifierHasKeyID
    self.subjectAltNameCritical = subjectAltNameCritical
    self.subjectIsEmpty = subjectIsEmpty
    self.policyConstraintsCritical = policyConstraintsCritical
    self.nameConstraints = nameConstraints
    self.malformedExtensions = malformedExtensions
    self.isSelfSigned = isSelfSigned
    self.signatureDigest = signatureDigest
  }

  public var isCA: Bool { basicConstraints?.isCA ?? false }
}
