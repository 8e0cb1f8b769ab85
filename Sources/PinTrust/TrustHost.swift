import Foundation

/// The host a connection is for, normalised once so that every later
/// comparison is a plain equality: a DNS name in lower-case A-label form
/// without a trailing dot, or an IP address.
public enum TrustHost: Sendable, Hashable, CustomStringConvertible {
  case dns(String)
  case ip(IPAddress)

  /// Parses a host as it appears in a URL, a CONNECT line, config or CLI.
  /// Returns nil for anything that is neither a valid IP address nor a valid
  /// DNS name; callers treat that as an error, never as "no host".
  public init?(_ raw: String) {
    // The common case first: a name with no colon and a last label that is
    // not a number cannot be an IP address in any spelling.
    if !raw.utf8.contains(UInt8(ascii: ":")) && !NumericHost.endsInNumber(Substring(raw)) {
      guard let name = TrustHost.normalizedDNSName(raw) else { return nil }
      self = .dns(name)
      return
    }
    var text = raw
    if text.hasPrefix("["), text.hasSuffix("]") {
      text = String(text.dropFirst().dropLast())
      guard let address = IPAddress(text), address.isIPv6 else { return nil }
      self = .ip(address)
      return
    }
    if let address = IPAddress(text) {
      self = .ip(address)
      return
    }
    if NumericHost.endsInNumber(Substring(text)) {
      guard let bytes = NumericHost.ipv4(Substring(text)), let address = IPAddress(bytes: bytes) else {
        return nil
      }
      self = .ip(address)
      return
    }
    guard let name = TrustHost.normalizedDNSName(text) else { return nil }
    self = .dns(name)
  }

  /// Lower-case, A-label, no trailing dot; nil if a label is empty, too long,
  /// or holds characters a host name cannot have. `*` is allowed only when
  /// `allowWildcard` (certificate patterns), and only as a whole label.
  static func normalizedDNSName(_ raw: String, allowWildcard: Bool = false) -> String? {
    if let plain = alreadyNormalized(raw) { return plain }
    var text = raw
    if text.hasSuffix(".") { text.removeLast() }
    guard !text.isEmpty, text.utf8.count <= 1000 else { return nil }
    var labels: [String] = []
    for rawLabel in text.split(separator: ".", omittingEmptySubsequences: false) {
      guard !rawLabel.isEmpty else { return nil }
      var label = String(rawLabel)
      if !label.allSatisfy(\.isASCII) {
        let folded = label.precomposedStringWithCanonicalMapping.lowercased()
        guard let encoded = Punycode.encode(folded) else { return nil }
        label = "xn--" + encoded
      }
      label = label.lowercased()
      guard label.utf8.count <= 63 else { return nil }
      if allowWildcard && label == "*" {
        labels.append(label)
        continue
      }
      // Letters, digits, hyphen; underscore too, which real service names use.
      let allowed = label.utf8.allSatisfy { byte in
        (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2d || byte == 0x5f
          || (allowWildcard && byte == 0x2a)
      }
      guard allowed else { return nil }
      labels.append(label)
    }
    // An all-numeric last label is not a DNS name (RFC 3696 §2); such a string
    // is a malformed IP address and must not be matched as a name.
    if let last = labels.last, last.allSatisfy(\.isNumber) { return nil }
    return labels.joined(separator: ".")
  }

  /// `raw` itself when it is already lower-case ASCII letters, digits,
  /// hyphens and underscores in non-empty labels of at most 63 bytes, with a
  /// last label that is not all digits — what the slow path would return
  /// unchanged. Nil means "take the slow path", not "invalid".
  private static func alreadyNormalized(_ raw: String) -> String? {
    var labelLength = 0
    var labelAllDigits = true
    for byte in raw.utf8 {
      if byte == UInt8(ascii: ".") {
        guard labelLength > 0 else { return nil }
        labelLength = 0
        labelAllDigits = true
        continue
      }
      let digit = byte >= 0x30 && byte <= 0x39
      guard (byte >= 0x61 && byte <= 0x7a) || digit || byte == 0x2d || byte == 0x5f else { return nil }
      labelAllDigits = labelAllDigits && digit
      labelLength += 1
      guard labelLength <= 63 else { return nil }
    }
    guard labelLength > 0, !labelAllDigits, raw.utf8.count <= 1000 else { return nil }
    return raw
  }

  public var description: String {
    switch self {
    case .dns(let name): return name
    case .ip(let address): return address.isIPv6 ? "[\(address)]" : address.description
    }
  }
}
