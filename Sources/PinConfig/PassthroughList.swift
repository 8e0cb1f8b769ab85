import PinTrust

/// Hosts spliced as raw tunnels instead of intercepted: `host` matches that
/// host, `*.domain` matches `domain` and every name below it.
public struct PassthroughList: Sendable {
  /// Each entry's value: whether its tunnels may open without SNI.
  private var table = DomainTable<Bool>()

  /// - Parameter withoutSNI: the entries written with `allowsMissingSNI: true`.
  public init(_ entries: [String], withoutSNI: [String] = []) {
    for entry in entries {
      guard let (host, subdomains) = PassthroughList.pattern(entry) else { continue }
      try? table.insert(domain: host, includesSubdomains: subdomains, rule: withoutSNI.contains(entry))
    }
  }

  /// The entry that covers `host`: its own name (exact, or the domain of a
  /// `*.domain` entry) and whether its tunnels may open without SNI.
  public func entry(covering host: TrustHost) -> (name: TrustHost, allowsMissingSNI: Bool)? {
    table.lookup(host).map { ($0.domain, $0.rule) }
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
