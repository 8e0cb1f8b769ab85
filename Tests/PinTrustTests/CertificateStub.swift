import Foundation

@testable import PinTrust

extension Certificate {
  /// A certificate value with only names set, for tests of the pure rules
  /// that read names (zero digests, an RSA-2048 key, dates that never end).
  static func stub(subject: String = "CN=test", commonName: String?, dns: [String] = [], ip: [String] = [])
    -> Certificate
  {
    let zero = Digest256(bytes: [UInt8](repeating: 0, count: 32))!
    return Certificate(
      der: [], fingerprint: zero, spkiFingerprint: zero, subject: subject, issuer: "CN=issuer",
      commonName: commonName, dnsNames: dns, ipAddresses: ip.compactMap(IPAddress.init),
      notBefore: .distantPast,
      notAfter: .distantFuture, publicKey: PublicKeyDescription(algorithm: .rsa, bits: 2048),
      signatureAlgorithm: "sha256WithRSAEncryption",
      profile: CertificateProfile(
        version: 3, extensionCount: 1, basicConstraints: nil, assertsKeyCertSign: false,
        hasSubjectKeyIdentifier: false, authorityKeyIdentifierHasKeyID: true, subjectAltNameCritical: false,
        subjectIsEmpty: false, policyConstraintsCritical: nil, nameConstraints: nil, malformedExtensions: [],
        isSelfSigned: false, signatureDigest: "sha256"))
  }
}
