import PinTrust

/// Identifies interchangeable upstream connections: same host and port, same
/// scheme, same rule of the same configuration generation. A connection is
/// never reused under another host or policy.
struct UpstreamKey: Hashable, Sendable, CustomStringConvertible {
  let host: TrustHost
  let port: Int
  let tls: Bool
  let policy: PolicyIdentity

  var description: String { "\(host):\(port)" }
}
