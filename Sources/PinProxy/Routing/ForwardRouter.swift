import PinConfig
import PinHTTP
import PinTLS
import PinTrust

/// What to do with a request head, decided from the configuration alone
/// (no I/O): forward it, open a tunnel for a CONNECT, or refuse it.
enum RoutingDecision {
  case forward(ForwardTarget)
  /// Spliced raw to the host; the client's TLS is its own.
  case passthrough(ForwardTarget)
  /// Answered with TLS under a leaf minted for the host; the requests inside
  /// go through the forward path.
  case intercept(ConnectTarget, InterceptionContext)
  case refuse(ProxyFailure)
}

/// Routes request heads of one forward listener through the domain policy
/// table of one configuration snapshot. Pure: the snapshot is immutable.
struct ForwardRouter {
  let snapshot: RuntimeSnapshot
  let bound: BoundListener
  var listener: ListenerConfig { bound.config }
  /// The last forward decision, by what it was decided from. A keep-alive
  /// client names the same host request after request; host parsing and the
  /// rule lookup are then done once per connection, not once per request.
  /// Sound because the snapshot is fixed for the router's lifetime and the
  /// decision depends on nothing else.
  private var last: Decided?
  /// The target last handed out: a client asking for the same path again
  /// (a poll, a health check, a benchmark) gets the same immutable object,
  /// not a new one.
  private var lastTarget: ForwardTarget?

  /// One object, not a tuple of values: the router (and so the machine
  /// holding it) is copied with one reference, and the memo is read
  /// without copying a host, a key and a route through their metadata.
  fileprivate final class Decided {
    let from: RouteInput
    let key: UpstreamKey
    let route: UpstreamRoute
    init(_ from: RouteInput, _ key: UpstreamKey, _ route: UpstreamRoute) {
      (self.from, self.key, self.route) = (from, key, route)
    }
  }

  fileprivate struct RouteInput: Equatable {
    var scheme: String
    var host: String
    var port: Int?
    var insideTunnel: Bool
  }

  /// The last forward decision as a finished connection leaves it, for
  /// the next connection of the same loop and listener
  /// (`ForwardStorageShelf.routeMemo`): a client that opens a connection
  /// per request names the same host each time, and its first request
  /// then skips the host parsing and rule lookup as a keep-alive request
  /// does. Taken only under the snapshot it was decided under (the
  /// generation: every snapshot installed has one of its own) and for the
  /// same listener (`portRefusal` reads its configuration): the decision
  /// depends on nothing else. It holds the decision, not the snapshot.
  struct Memo {
    fileprivate let generation: UInt64
    fileprivate let bound: BoundListener
    fileprivate let decided: Decided
    fileprivate let target: ForwardTarget?
  }

  /// This router's memo for the next connection; nil before a forward decision.
  var memo: Memo? {
    last.map { Memo(generation: snapshot.generation, bound: bound, decided: $0, target: lastTarget) }
  }

  /// Starts from a finished connection's memo when it was decided under
  /// this router's snapshot and listener; otherwise leaves the router as it is.
  mutating func adopt(_ memo: Memo?) {
    guard last == nil, let memo, memo.generation == snapshot.generation, memo.bound === bound else { return }
    (last, lastTarget) = (memo.decided, memo.target)
  }

  /// - Parameter client: who the client is, checked again against
  ///   `allowedClients` and `allowedUsers` whenever a reload brings a new snapshot.
  init(snapshot: RuntimeSnapshot, listener: ListenerConfig, client: ClientOrigin? = nil) {
    self.init(snapshot: snapshot, bound: BoundListener(listener), client: client)
  }

  init(snapshot: RuntimeSnapshot, bound: BoundListener, client: ClientOrigin? = nil) {
    self.snapshot = snapshot
    self.bound = bound
    // The listener's name, not its whole configuration copied out of `bound`.
    let access = bound.access(under: snapshot)
    authenticator = access.authenticator
    refusal = access.denial(
      ofListener: bound.config.name, to: client?.address, local: client?.local
    ).map {
      ProxyFailure(status: 403, code: .clientNotAllowed, reason: $0)
    }
  }

  /// The listener as this snapshot has it when it serves a PAC file
  /// (`pac`, default true); nil when it does not.
  var pacListener: ListenerConfig? {
    let current = snapshot.configuration.listeners.first { $0.name == listener.name } ?? listener
    return current.pac ? current : nil
  }

  /// The listener's proxy authentication under this snapshot; nil when it
  /// has none (looked up once per router, not per request).
  let authenticator: ProxyAuthenticator?
  /// Set when nobody on this connection may be served under this snapshot:
  /// the listener is closed (see `ListenerAccess.closed`) or a reload took
  /// the client's address out of `allowedClients`. Every request is refused.
  let refusal: ProxyFailure?

  /// - Parameter tunnel: set inside an intercepted CONNECT, whose host is
  ///   authoritative for every request in it.
  mutating func route(_ head: HTTPRequestHead, inside tunnel: ConnectTarget?) -> RoutingDecision {
    let scheme: String
    let rawHost: String
    let explicitPort: Int?
    let path: String
    switch (head.target, tunnel) {
    case (.authority(let host, let port), nil):
      return routeConnect(host: host, port: port)
    case (.origin(let originPath), let tunnel?) where tunnel.plain:
      // Port 80 is http's own: an upgrade to TLS then goes to 443, as it
      // does for `http://host/` in absolute form.
      let port = tunnel.port == 80 ? nil : tunnel.port
      (scheme, rawHost, explicitPort, path) = ("http", tunnel.host.description, port, originPath)
    case (.origin(let originPath), let tunnel?):
      (scheme, rawHost, explicitPort, path) = ("https", tunnel.host.description, tunnel.port, originPath)
    case (.absolute(let urlScheme, let urlHost, let urlPort, let urlPath), nil):
      (scheme, rawHost, explicitPort, path) = (urlScheme, urlHost, urlPort, urlPath)
    case (_, _?):
      return .refuse(.badRequest("inside a CONNECT tunnel requests must use origin-form (GET /path)"))
    default:
      return .refuse(.badRequest("a forward proxy needs absolute-form requests, e.g. GET http://host/path"))
    }
    let input = RouteInput(scheme: scheme, host: rawHost, port: explicitPort, insideTunnel: tunnel != nil)
    // A rule's pin list may change under a fixed snapshot: the memo holds
    // only while the key names the list version in force.
    if let last, last.from == input, last.key.policy.pinList == (last.route.pinStore?.version ?? 0) {
      // `lastTarget` is always made from `last` (the two are set together).
      if let lastTarget, lastTarget.path == path { return .forward(lastTarget) }
      let target = ForwardTarget(key: last.key, route: last.route, path: path)
      lastTarget = target
      return .forward(target)
    }
    let route: UpstreamRoute
    switch snapshot.hostRoutes.route(rawHost, under: snapshot) {
    case .route(let found): route = found
    case .denied(let host): return .refuse(.denied(host))
    case .invalid: return .refuse(.badRequest("\"\(rawHost)\" is not a valid host"))
    }
    let host = route.host
    // A plain http:// request goes over TLS unless its rule allows insecure loads.
    let tls = scheme == "https" || !route.allowsInsecureHTTPLoads
    let port = explicitPort ?? (tls ? 443 : 80)
    // Inside an intercepted CONNECT the port was checked on the CONNECT line.
    if tunnel == nil, let refusal = portRefusal(port) { return .refuse(refusal) }
    let key = UpstreamKey(host: host, port: port, tls: tls, policy: route.identity)
    last = Decided(input, key, route)
    let target = ForwardTarget(key: key, route: route, path: path)
    lastTarget = target
    return .forward(target)
  }

  private func pinsNotEnforceable(_ host: TrustHost, rule: String, listed: Bool) -> ProxyFailure {
    let why =
      listed
      ? "a passthrough pattern of listener \(listener.name) would splice it"
      : "listener \(listener.name) has intercept: false and would splice it"
    return ProxyFailure(
      status: 403, code: .pinsNotEnforceable,
      reason:
        "rule \(rule) pins \(host), but \(why) raw, where no pin can be checked; set intercept: true on"
        + " listener \(listener.name) (and take \(host) out of its passthrough patterns), or add \(host)"
        + " itself to its passthrough list to waive the rule's pins for this listener")
  }

  private func routeConnect(host rawHost: String, port: Int) -> RoutingDecision {
    guard let host = TrustHost(rawHost) else {
      return .refuse(.badRequest("\"\(rawHost)\" is not a valid host"))
    }
    return routeConnect(to: host, port: port)
  }

  /// CONNECT (or the SOCKS5 CONNECT that stands for one): refused (port not
  /// allowed, host denied), spliced raw (passthrough hosts, or a listener
  /// with `intercept: false`), or intercepted.
  func routeConnect(to host: TrustHost, port: Int) -> RoutingDecision {
    if let refusal = portRefusal(port) { return .refuse(refusal) }
    let passthrough = snapshot.passthrough[listener.name]
    let listedPassthrough = passthrough?.contains(host) ?? false
    let route = UpstreamRoute(host: host, snapshot: snapshot)
    guard listedPassthrough || route != nil else {
      // A denied host on an intercepting listener: the CONNECT is accepted
      // and the 403 answers the first request inside the client's TLS, where
      // a browser or a script shows it to the person (a refused CONNECT
      // shows only a generic tunnel error). Nothing is sent upstream: the
      // requests inside route to this same refusal. Without interception
      // there is no leaf to answer inside with, so the CONNECT gets the 403.
      // A SOCKS client is told by its reply code (not allowed by ruleset).
      if listener.intercept, listener.mode != .socks5, let interception = snapshot.interception[listener.name]
      {
        return .intercept(ConnectTarget(host: host, port: port), interception)
      }
      return .refuse(.denied(host))
    }
    if listedPassthrough || !listener.intercept {
      // Fail closed: a splice cannot check pins. Only an entry naming this
      // very host waives them (said by `check`, at start and on reload, and
      // counted per tunnel).
      let namedByEntry = passthrough?.names(host) ?? false
      if let rule = route?.compiled, rule.pins, !namedByEntry {
        return .refuse(pinsNotEnforceable(host, rule: rule.name, listed: listedPassthrough))
      }
      let named = namedByEntry || route?.namedExplicitly == true
      let key = UpstreamKey(
        host: host, port: port, tls: false,
        policy: PolicyIdentity(generation: snapshot.generation, rule: .passthrough))
      return .passthrough(
        ForwardTarget(
          key: key,
          route: .plain(
            host, namedExplicitly: named, governedBy: route?.compiled,
            parent: route?.parent ?? snapshot.defaultParent),
          path: ""))
    }
    guard route != nil, let interception = snapshot.interception[listener.name] else {
      return .refuse(
        ProxyFailure(
          status: 502, code: .handshakeFailed, reason: "this listener has no local CA to intercept with"))
    }
    return .intercept(ConnectTarget(host: host, port: port), interception)
  }

  /// One port policy for every way of reaching an upstream: the listener's
  /// `allowedConnectPorts` governs CONNECT and absolute-form URLs alike, on
  /// the port the client named (a `connectTo` mapping does not change it).
  func portRefusal(_ port: Int) -> ProxyFailure? {
    guard !listener.allowedConnectPorts.contains(port) else { return nil }
    return ProxyFailure(
      status: 403, code: .deniedByPolicy,
      reason: "port \(port) is not allowed (allowedConnectPorts: \(listener.allowedConnectPorts))")
  }
}
