/// App Transport Security's and the CA/Browser Forum's key and signature
/// rules (BR 6.1.5, 7.1.3), over the whole path (`weak-key`):
///
/// - every key, the anchor's included (Apple's SSL policy checks key size
///   on every certificate, anchors too): RSA of at least 2048 bits whose
///   modulus is a whole number of bytes, or ECDSA on P-256, P-384 or P-521.
///   DSA, other curves and other key types (EdDSA among them) are refused:
///   neither ATS nor the Web PKI admits them for TLS servers.
/// - every signature below the anchor made with SHA-256 or stronger: no
///   SHA-1, MD5 or MD4. The anchor's own signature is not relied on (it is
///   trusted by configuration), so a SHA-1 self-signed root is fine.
///
/// A policy that allows invalid certificates skips these checks, as it did
/// before they were part of the evaluation.
enum KeyStrength {
  static let permittedCurves: Set<String> = ["P-256", "P-384", "P-521"]
  static let weakDigests: Set<String> = ["sha1", "md5", "md4", "md2"]

  static func violation(in chain: [Certificate]) -> ChainFailure? {
    for (depth, certificate) in chain.enumerated() {
      if let problem = weakness(of: certificate.publicKey) {
        return ChainProfile.failure(.weakKey, chain, depth, problem)
      }
      if depth < chain.count - 1, let digest = certificate.profile.signatureDigest,
        weakDigests.contains(digest)
      {
        return ChainProfile.failure(
          .weakKey, chain, depth,
          "signed with \(certificate.signatureAlgorithm) (SHA-256 or stronger required)")
      }
    }
    return nil
  }

  /// Why the key is too weak, or nil.
  static func weakness(of key: PublicKeyDescription) -> String? {
    switch key.algorithm {
    case .rsa:
      if key.bits < 2048 { return "key \(key) is weaker than RSA-2048" }
      if key.bits % 8 != 0 { return "key \(key) has a modulus that is not a whole number of bytes" }
      return nil
    case .ec:
      guard let curve = key.curve, permittedCurves.contains(curve) else {
        return "key \(key) is not on P-256, P-384 or P-521"
      }
      return nil
    case .dsa:
      return "key \(key) is DSA, which TLS servers may not use"
    case .ed25519, .ed448, .other:
      return "key \(key) is not RSA or ECDSA, the key types ATS and the CA/Browser Forum admit"
    }
  }
}
