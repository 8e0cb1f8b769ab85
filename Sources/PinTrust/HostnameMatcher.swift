/// RFC 6125 host checking against a leaf certificate.
///
/// - DNS hosts match subjectAltName dNSName entries only. The subject common
///   name is never consulted, even when the certificate has no SAN: browsers,
///   Apple platforms (since iOS 13) and Go dropped that fallback, the CA/B
///   Forum requires SANs, and a CN is easy to get wrong (it holds display
///   names). A CN-only certificate therefore fails the host check; a policy
///   that must accept one pins it and disables `validatesDomainName`.
/// - A wildcard is honoured only as the whole leftmost label (`*.example.com`),
///   matches exactly one label, and needs at least two labels after it, so
///   `*.com`, `f*.example.com` and `www.*.example.com` match nothing (§6.4.3).
/// - Comparison is case-insensitive and ignores a trailing dot on the host.
///   A certificate name must be in preferred name syntax (`DNSNameSyntax`):
///   one with an underscore, a non-ASCII byte or a trailing dot matches no
///   host. Unicode hosts compare in their A-label form.
/// - IP hosts match iPAddress entries byte for byte, never a DNS entry.
public enum HostnameMatcher {
  public static func matches(_ leaf: Certificate, host: TrustHost) -> Bool {
    switch host {
    case .ip(let address):
      return leaf.ipAddresses.contains(address)
    case .dns(let name):
      return leaf.dnsNames.contains { pattern in matches(pattern: pattern, name: name) }
    }
  }

  /// `name` must already be normalised (TrustHost does it); `pattern` is taken
  /// as it appears in the certificate.
  public static func matches(pattern rawPattern: String, name: String) -> Bool {
    // A name outside preferred name syntax (an underscore, a non-ASCII
    // byte, a trailing dot) matches nothing, not even its punycode spelling.
    guard DNSNameSyntax.isValidSubjectAltName(rawPattern) else { return false }
    guard let pattern = TrustHost.normalizedDNSName(rawPattern, allowWildcard: true) else { return false }
    guard pattern.contains("*") else { return pattern == name }
    guard pattern.hasPrefix("*.") else { return false }
    let rest = pattern.dropFirst(2)
    guard !rest.contains("*"), rest.split(separator: ".").count >= 2 else { return false }
    guard let firstDot = name.firstIndex(of: ".") else { return false }
    let firstLabel = name[..<firstDot]
    return !firstLabel.isEmpty && name[name.index(after: firstDot)...] == rest
  }
}
