import PinTrust

/// Hosts spliced as raw tunnels instead of intercepted: `host` matches that
/// host, `*.domain` matches `domain` and every name below it.
public struct PassthroughList: Sendable {
  private var table = DomainTable<Bool>()

  public init(_ entries: [String]) {
    for entry in entries {
      guard let (host, subdomains) = PassthroughList.pattern(entry) else { continue }
      try? table.insert(domain: host, includesSubdomains: subdomains, rule: true)
    }
  }

  public static func pattern(_ entry: String) -> (TrustHost, Bool)? {
    if entry.hasPrefix("*.") {
      return TrustHost(String(entry.dropFirst(2))).map { ($0, true) }
    }
    return TrustHost(entry).map { ($0, false) }
  }

  public func contains(_ host: TrustHost) -> Bool { table.lookup(host) != nil }

  /// Listed by its own name, not only through a `*.domain` entry above it.
  public func names(_ host: TrustHost) -> Bool { table.lookup(host)?.domain == host }
}
