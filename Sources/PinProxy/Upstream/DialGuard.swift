import PinEventLoop
import PinTrust

/// The one internal-address guard of every dial (`UpstreamDialer.open`),
/// decided once per dial from its route: where the dial may connect.
///
/// A host no configuration names (no domain rule naming it, no `connectTo`
/// mapping) never reaches an internal address, and under `defaults` no
/// special-purpose range either unless `defaults.allowedNetworks` opens it
/// (`InternalAddresses.egressRefusal`); a certificate's URL never reaches
/// this proxy's own listeners, whatever names it. A direct dial is judged
/// on the addresses the name resolved to, so a name that resolves to
/// 127.0.0.1 is refused like the literal. Through a parent proxy the
/// parent resolves names with its own view of the network: a target
/// written as an IP literal is judged as a direct dial's address would be,
/// and the parent's own addresses only by the loop rule (a parent that is
/// one of this proxy's listeners would send every tunnel round again); the
/// parent is the operator's explicit choice, so nothing else about its
/// address is judged.
///
/// Fail closed: an address that cannot be judged is refused.
struct DialGuard {
  /// How far the dial may reach, strictest last.
  enum Reach {
    case anywhere
    /// Anywhere but this proxy's own listeners (a certificate's URL a
    /// domain rule or `connectTo` names).
    case notOwnListeners
    /// No loopback, link-local, unspecified or own address (a host a
    /// domain rule governs without naming it).
    case notInternal
    /// Nor a special-purpose range (a host only `defaults` governs).
    case notInternalOrSpecialPurpose
  }

  let reach: Reach
  let key: UpstreamKey
  let followsCertificate: Bool
  let addresses: InternalAddresses

  /// `mapped`: a `connectTo` entry chose the address (an explicit choice,
  /// like a domain rule that names the host).
  init(key: UpstreamKey, route: UpstreamRoute, mapped: Bool, addresses: InternalAddresses) {
    let unnamed = !route.namedExplicitly && !mapped
    reach =
      unnamed
      ? (route.governedByDefaults ? .notInternalOrSpecialPurpose : .notInternal)
      : route.followsCertificate ? .notOwnListeners : .anywhere
    self.key = key
    followsCertificate = route.followsCertificate
    self.addresses = addresses
  }

  /// Why the dial may not connect to `address`; nil when it may.
  func refusal(_ address: SocketAddress) -> ProxyFailure? {
    guard reach != .anywhere else { return nil }
    guard let ip = IPAddress(bytes: address.addressBytes) else {
      return refused("\(address) is not an IP address")
    }
    return refusal(ip, port: address.port)
  }

  /// Why the dial may not connect to `address:port`; nil when it may.
  func refusal(_ address: IPAddress, port: Int) -> ProxyFailure? {
    let why: String?
    switch reach {
    case .anywhere: why = nil
    case .notOwnListeners: why = addresses.ownListener(address, port: port)
    case .notInternal: why = addresses.refusal(address, port: port)
    case .notInternalOrSpecialPurpose: why = addresses.egressRefusal(address, port: port)
    }
    return why.map(refused)
  }

  /// Why the dial may not go through `parent` at `address` (resolved from
  /// its name, so always an IP address): only when it is one of this
  /// proxy's own listeners.
  func parentRefusal(_ address: IPAddress, port: Int, parent: ParentProxy) -> ProxyFailure? {
    guard let why = addresses.ownListenerAsParent(address, port: port) else { return nil }
    return ProxyFailure(
      status: 403, code: .deniedByPolicy,
      reason: "parent proxy \(parent.name) is this proxy's own listener: every tunnel would come round again",
      detail: why)
  }

  private func refused(_ why: String) -> ProxyFailure {
    let reason =
      followsCertificate
      ? "a certificate's URL \(key) leads to an internal address; only a domain rule or connectTo"
        + " entry that names the host lets it, and never to this proxy's own listeners"
      : "\(key) is reached only through a domain rule that names it"
    return ProxyFailure(status: 403, code: .deniedByPolicy, reason: reason, detail: why)
  }
}
