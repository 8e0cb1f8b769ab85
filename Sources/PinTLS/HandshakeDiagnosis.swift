import COpenSSL
import PinTrust

/// Turns what went wrong in an upstream handshake into a stable failure code.
/// (Key and signature strength are part of the trust evaluation:
/// `KeyStrength` in PinTrust.)
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
}
