/// The "preferred name syntax" a dNSName must have (RFC 5280 §4.2.1.6, which
/// cites RFC 1034 §3.5 as relaxed by RFC 1123 §2.1): ASCII letters, digits
/// and hyphens in labels of 1 to 63 bytes that neither start nor end with a
/// hyphen, at most 253 bytes, no empty label (so no leading or trailing dot).
///
/// A subjectAltName may also be a wildcard: `*` as its whole leftmost label
/// (CA/Browser Forum BR 7.1.2.7.12). Underscores and non-ASCII bytes are not
/// in the syntax: a certificate that carries such a name is malformed, and the
/// name never matches a host, not even the host's punycode spelling.
public enum DNSNameSyntax {
  /// Whether `name` is a well-formed subjectAltName dNSName.
  public static func isValidSubjectAltName(_ name: String) -> Bool {
    let utf8 = Array(name.utf8)
    if utf8.count >= 2 && utf8[0] == UInt8(ascii: "*") && utf8[1] == UInt8(ascii: ".") {
      return isPreferredSyntax(utf8[2...])
    }
    return isPreferredSyntax(utf8[...])
  }

  /// Whether `name` is a well-formed dNSName name constraint: preferred
  /// syntax with no wildcard and no leading period (RFC 5280 §4.2.1.10 gives
  /// the leading-period form to URIs and mailboxes only). The empty string
  /// is a valid constraint: it covers every name.
  public static func isValidConstraint(_ name: String) -> Bool {
    name.isEmpty || isPreferredSyntax(Array(name.utf8)[...])
  }

  static func isPreferredSyntax(_ bytes: ArraySlice<UInt8>) -> Bool {
    guard !bytes.isEmpty, bytes.count <= 253 else { return false }
    var labelLength = 0
    var previous: UInt8 = UInt8(ascii: ".")
    for byte in bytes {
      if byte == UInt8(ascii: ".") {
        guard labelLength > 0, previous != UInt8(ascii: "-") else { return false }
        labelLength = 0
      } else {
        guard isLetterOrDigit(byte) || (byte == UInt8(ascii: "-") && labelLength > 0) else { return false }
        labelLength += 1
        guard labelLength <= 63 else { return false }
      }
      previous = byte
    }
    return labelLength > 0 && previous != UInt8(ascii: "-")
  }

  static func isLetterOrDigit(_ byte: UInt8) -> Bool {
    (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x30 && byte <= 0x39)
  }
}
