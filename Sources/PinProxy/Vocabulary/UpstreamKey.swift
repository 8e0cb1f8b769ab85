import PinTrust

/// Identifies interchangeable upstream connections: same host and port, same
/// scheme, same rule of the same configuration generation. A connection is
/// never reused under another host or policy.
///
/// The pool and the budget look a key up several times per request: its
/// hash is computed once, when the route is decided (once per connection
/// and host), and a look-up hashes that one word.
struct UpstreamKey: Hashable, Sendable, CustomStringConvertible {
  let host: TrustHost
  let port: Int
  let tls: Bool
  let policy: PolicyIdentity
  private let hashOfFields: Int

  init(host: TrustHost, port: Int, tls: Bool, policy: PolicyIdentity) {
    (self.host, self.port, self.tls, self.policy) = (host, port, tls, policy)
    var hasher = Hasher()
    hasher.combine(host)
    hasher.combine(port)
    hasher.combine(tls)
    hasher.combine(policy)
    hashOfFields = hasher.finalize()
  }

  var description: String { "\(host):\(port)" }

  static func == (left: UpstreamKey, right: UpstreamKey) -> Bool {
    left.hashOfFields == right.hashOfFields && left.port == right.port && left.tls == right.tls
      && left.policy == right.policy && left.host == right.host
  }

  func hash(into hasher: inout Hasher) { hasher.combine(hashOfFields) }
}
