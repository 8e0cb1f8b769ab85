/// A TLS protocol version a policy may require as its minimum (ATS's
/// `NSExceptionMinimumTLSVersion`). A plain value here; PinTLS maps it to
/// OpenSSL's constants.
public enum TLSVersion: String, Sendable, CaseIterable, Comparable {
  case tls10 = "1.0"
  case tls11 = "1.1"
  case tls12 = "1.2"
  case tls13 = "1.3"

  public static func < (lhs: TLSVersion, rhs: TLSVersion) -> Bool { lhs.rawValue < rhs.rawValue }
}
