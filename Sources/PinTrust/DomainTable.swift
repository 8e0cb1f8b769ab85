/// Routes a host to the rule that governs it: an exact domain beats a parent;
/// among parents with `includesSubdomains` the longest wins. Names compare
/// case-insensitively in A-label form; IP hosts match only an exact IP rule.
public struct DomainTable<Rule: Sendable>: Sendable {
  public struct Entry: Sendable {
    public let domain: TrustHost
    public let includesSubdomains: Bool
    public let rule: Rule
  }

  private var exact: [TrustHost: Entry] = [:]

  public init() {}

  public enum InsertError: Error, Equatable { case duplicate(TrustHost) }

  /// Adds a rule; a second rule for the same domain is an error (config must
  /// not silently keep one of two).
  public mutating func insert(domain: TrustHost, includesSubdomains: Bool, rule: Rule) throws(InsertError) {
    guard exact[domain] == nil else { throw .duplicate(domain) }
    exact[domain] = Entry(domain: domain, includesSubdomains: includesSubdomains, rule: rule)
  }

  public var count: Int { exact.count }
  public var entries: [Entry] { Array(exact.values) }

  /// The entry for `host`, or nil when no rule covers it (defaults apply).
  public func lookup(_ host: TrustHost) -> Entry? {
    if let entry = exact[host] { return entry }
    guard case .dns(let name) = host else { return nil }
    // Walk parents from the longest: a.b.c.example → b.c.example → c.example → example.
    var remainder = Substring(name)
    while let dot = remainder.firstIndex(of: ".") {
      remainder = remainder[remainder.index(after: dot)...]
      if let entry = exact[.dns(String(remainder))], entry.includesSubdomains { return entry }
    }
    return nil
  }
}
