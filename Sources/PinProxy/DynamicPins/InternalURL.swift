import Foundation
import PinConfig
import PinTrust

/// An `http(s)://host[:port]/path` the daemon itself requests (a pin list,
/// a report URI), checked once when the configuration is compiled (by
/// `ConfigValues.internalURL`, the rule `pinproxy import` applies too).
public struct InternalURL: Sendable, Equatable, CustomStringConvertible {
  public let tls: Bool
  public let host: TrustHost
  public let port: Int
  /// Origin-form: path and query.
  public let target: String
  public let description: String

  public init?(_ text: String) {
    guard let url = ConfigValues.internalURL(text) else { return nil }
    tls = url.tls
    host = url.host
    port = url.port
    target = url.target
    description = text
  }

  /// The Host header: the port only when it is not the scheme's default.
  var authority: String { port == (tls ? 443 : 80) ? host.description : "\(host):\(port)" }
}
