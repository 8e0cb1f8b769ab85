import COpenSSL

/// A TLS protocol version as the config spells it ("1.0" … "1.3").
public enum TLSVersion: String, Sendable, CaseIterable, Comparable {
  case tls10 = "1.0"
  case tls11 = "1.1"
  case tls12 = "1.2"
  case tls13 = "1.3"

  public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.rawValue < rhs.rawValue }

  var openSSLValue: Int32 {
    switch self {
    case .tls10: return TLS1_VERSION
    case .tls11: return TLS1_1_VERSION
    case .tls12: return TLS1_2_VERSION
    case .tls13: return TLS1_3_VERSION
    }
  }
}
