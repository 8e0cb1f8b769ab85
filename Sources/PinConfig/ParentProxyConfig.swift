/// `parentProxies.NAME` (docs/CONTRACTS.md): a proxy that every upstream
/// connection of the rules naming it goes through — a tunnel to the host
/// and port as the client named them, inside which pinproxy runs its own
/// TLS and trust decision.
public struct ParentProxyConfig: Sendable {
  /// `http://` (a CONNECT, RFC 9110 §9.3.6) or `socks5://` (RFC 1928; the
  /// parent resolves names).
  public enum Kind: String, Sendable {
    case http
    case socks5
  }

  public var name: String
  public var kind: Kind
  public var host: String
  public var port: Int
  /// One line `user:password`: Basic to an HTTP parent, RFC 1929 to SOCKS5.
  /// Read at start and on reload; never in the URL.
  public var credentialsFile: ConfigPath?
  public var location: Location

  public init(
    name: String, kind: Kind, host: String, port: Int, credentialsFile: ConfigPath?, location: Location
  ) {
    self.name = name
    self.kind = kind
    self.host = host
    self.port = port
    self.credentialsFile = credentialsFile
    self.location = location
  }

  /// `scheme://host:port` as configured, without credentials (for logs and the page).
  public var url: String {
    "\(kind.rawValue)://\(host.contains(":") ? "[\(host)]" : host):\(port)"
  }
}

/// A rule's `parentProxy`: through a named parent, or `direct`.
public enum ParentChoice: Sendable, Equatable {
  case direct
  case parent(String)
}
