import Foundation
import PinTrust

/// An `http(s)://host[:port]/path` the daemon itself requests (a pin list,
/// a report URI), checked once when the configuration is compiled.
public struct InternalURL: Sendable, Equatable, CustomStringConvertible {
  public let tls: Bool
  public let host: TrustHost
  public let port: Int
  /// Origin-form: path and query.
  public let target: String
  public let description: String

  public init?(_ text: String) {
    guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
      scheme == "https" || scheme == "http", let rawHost = components.host, let host = TrustHost(rawHost),
      components.user == nil, components.password == nil, components.fragment == nil
    else { return nil }
    let port = components.port ?? (scheme == "https" ? 443 : 80)
    guard (1...65535).contains(port) else { return nil }
    tls = scheme == "https"
    self.host = host
    self.port = port
    let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
    target = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    // Only printable ASCII reaches a request line.
    guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return nil }
    description = text
  }

  /// The Host header: the port only when it is not the scheme's default.
  var authority: String { port == (tls ? 443 : 80) ? host.description : "\(host):\(port)" }
}
