import COpenSSL
import PinTrust

extension TLSVersion {
  var openSSLValue: Int32 {
    switch self {
    case .tls10: return TLS1_VERSION
    case .tls11: return TLS1_1_VERSION
    case .tls12: return TLS1_2_VERSION
    case .tls13: return TLS1_3_VERSION
    }
  }
}
