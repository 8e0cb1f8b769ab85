import PinTrust

/// Where a forwarded request goes: the upstream (host, port, scheme, rule)
/// and the path sent there. A class, immutable: the machine's state and
/// actions carry it by reference, so moving an exchange between states
/// copies one pointer instead of a route's worth of strings and references.
final class ForwardTarget: Sendable {
  let key: UpstreamKey
  let route: UpstreamRoute
  let path: String

  /// The Host header sent upstream: the port only when it is not the
  /// scheme's default. Made once per target, which a keep-alive client's
  /// requests share, not per request sent.
  let authority: String

  init(key: UpstreamKey, route: UpstreamRoute, path: String) {
    self.key = key
    self.route = route
    self.path = path
    let defaultPort = key.tls ? 443 : 80
    authority = key.port == defaultPort ? key.host.description : "\(key.host):\(key.port)"
  }
}

/// The host and port of an intercepted CONNECT, which every request inside
/// the tunnel goes to.
struct ConnectTarget: Equatable {
  let host: TrustHost
  let port: Int
  /// The client spoke plain HTTP in the tunnel instead of TLS (undici's
  /// ProxyAgent does for `http://` URLs): its requests are `http://host:port`
  /// requests, upgraded to TLS unless the rule allows insecure loads.
  var plain = false
}
