import COpenSSL
import PinTrust

/// Turns what went wrong in an upstream handshake into a stable failure code
/// and a sentence, and applies the ATS key and signature strength rules.
public enum HandshakeDiagnosis {
  /// The code for a failed handshake. OpenSSL reports a protocol floor the
  /// server cannot meet as an unsupported protocol or a protocol_version
  /// alert; a server with no forward-secret suite answers our ECDHE-only
  /// offer with a handshake_failure alert before sending its certificate.
  public static func code(for failure: TLSEngine.Failure, engine: TLSEngine, requiresForwardSecrecy: Bool)
    -> FailureCode
  {
    switch failure.reason {
    case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_TLSV1_ALERT_PROTOCOL_VERSION, SSL_R_VERSION_TOO_LOW:
      return .tlsVersion
    case SSL_R_NO_CIPHERS_AVAILABLE, SSL_R_NO_SHARED_CIPHER:
      return .weakCipher
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE where requiresForwardSecrecy && engine.peerChain().isEmpty:
      return .weakCipher
    default:
      return .handshakeFailed
    }
  }

  /// ATS strength: the leaf key at least RSA-2048 or EC-256, and no
  /// certificate below a self-signed root signed with SHA-1 or MD5.
  /// Returns the problem, or nil when the chain is strong enough.
  public static func weakness(of chain: [X509Certificate]) -> String? {
    if let leaf = chain.first {
      let key = leaf.publicKeyDescription
      switch key.algorithm {
      case .rsa where key.bits < 2048: return "leaf key \(key) is weaker than RSA-2048"
      case .ec where key.bits < 256: return "leaf key \(key) is weaker than EC-256"
      case .dsa: return "leaf key \(key) is DSA"
      default: break
      }
    }
    for (index, certificate) in chain.enumerated() {
      let selfSigned = X509_check_issued(certificate.pointer, certificate.pointer) == X509_V_OK
      if selfSigned && index > 0 { continue }
      var digest: Int32 = 0
      var publicKey: Int32 = 0
      guard OBJ_find_sigid_algs(X509_get_signature_nid(certificate.pointer), &digest, &publicKey) == 1 else {
        continue
      }
      if digest == NID_sha1 || digest == NID_md5 || digest == NID_md4 {
        return "certificate at depth \(index) is signed with \(certificate.signatureAlgorithm)"
      }
    }
    return nil
  }
}
