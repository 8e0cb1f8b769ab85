/// Parsing of SPKI pins as operators write them: `sha256/BASE64` (TrustKit,
/// Envoy, HPKP) or `pin-sha256="BASE64"` (HPKP header form).
public enum SPKIPin {
  public static let prefix = "sha256/"

  public enum ParseError: Error, Equatable, CustomStringConvertible {
    case missingPrefix(String)
    case notBase64Of32Bytes(String)

    public var description: String {
      switch self {
      case .missingPrefix(let text):
        return "pin \"\(text)\" must be written sha256/BASE64 (the SHA-256 of the SubjectPublicKeyInfo)"
      case .notBase64Of32Bytes(let text):
        return "pin \"\(text)\" is not standard base64 of a 32-byte SHA-256 digest"
      }
    }
  }

  public static func parse(_ text: String) throws(ParseError) -> Digest256 {
    var body: Substring
    if text.hasPrefix(prefix) {
      body = text.dropFirst(prefix.count)
    } else if text.hasPrefix("pin-sha256=\""), text.hasSuffix("\""), text.count > 13 {
      body = text.dropFirst("pin-sha256=\"".count).dropLast()
    } else {
      throw .missingPrefix(text)
    }
    guard let digest = Digest256(base64: String(body)) else { throw .notBase64Of32Bytes(text) }
    return digest
  }

  public static func format(_ digest: Digest256) -> String { prefix + digest.base64 }
}
