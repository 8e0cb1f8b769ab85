import PinConfig
import PinTrust

extension ForwardRouter {
  /// Why a spliced CONNECT to `host` may not carry the ClientHello judged
  /// `verdict`; nil when it may. A splice is decided by the CONNECT's host,
  /// so the name the client asks the server for (SNI) must be that host or
  /// one the same decision covers: the same passthrough entry, or, on a
  /// listener that does not intercept, the same rule. Anything else is
  /// domain fronting — a tunnel allowed for one name serving another.
  ///
  /// Fail closed: a ClientHello without a name, or bytes that are no
  /// ClientHello at all, open a tunnel only under a passthrough entry
  /// written with `allowsMissingSNI: true` (a client that cannot send SNI,
  /// or a protocol other than TLS, that the operator chose to let through).
  func spliceRefusal(_ verdict: ClientHelloName.Verdict, connectHost host: TrustHost) -> String? {
    let list = snapshot.passthrough[listener.name]
    let entry = list?.entry(covering: host)
    switch verdict {
    case .more:
      return nil
    case .named(let name):
      guard let named = TrustHost(name) else { return "server_name \(name) is not a host" }
      if named == host { return nil }
      if let entry {
        if list?.entry(covering: named)?.name == entry.name { return nil }
      } else if let rule = UpstreamRoute(host: host, snapshot: snapshot)?.compiled,
        UpstreamRoute(host: named, snapshot: snapshot)?.compiled === rule
      {
        return nil
      }
      return "the ClientHello asks for \(name), not \(host): a spliced tunnel carries only the host it was"
        + " opened for (or one the same passthrough entry covers)"
    case .unnamed:
      if entry?.allowsMissingSNI == true { return nil }
      return "the ClientHello names no host (SNI); only a passthrough entry with allowsMissingSNI: true"
        + " opens such a tunnel"
    case .malformed(let why):
      if entry?.allowsMissingSNI == true { return nil }
      return why
        + "; only a passthrough entry with allowsMissingSNI: true opens a tunnel without a ClientHello"
        + " naming its host"
    }
  }
}
