import PinConfig
import PinTLS
import PinTrust

/// What governs one upstream host: the compiled rule the snapshot routes it
/// to, and the facts that belong to the host rather than the rule. Made for
/// every request, so it holds a reference to the rule instead of copies of
/// its parts.
public struct UpstreamRoute: Sendable {
  public let host: TrustHost
  /// nil only for plain TCP routes (passthrough), which never carry TLS of ours.
  let compiled: CompiledRule?
  /// Whether configuration named this host explicitly (a domain rule or a
  /// passthrough entry for exactly this name, a tunnel's upstream). Only then may it resolve to a
  /// loopback, link-local or own-listener address (`InternalAddresses`).
  public var namedExplicitly: Bool
  /// The URL came from a certificate (a CRL distribution point, an OCSP
  /// responder): an origin chose it, so even a named or mapped host may
  /// not lead to the proxy's own listeners or admin address.
  var followsCertificate = false
  /// A passthrough route: the rule that governs the host (whose pins, if
  /// any, a passthrough entry waived), for the log line and the metric.
  private(set) var governing: CompiledRule?
  /// The parent proxy connections to the host go through; nil: direct.
  let parent: ParentProxy?
  /// No rule names the host: `defaults` governs it, and the egress guard
  /// keeps it out of internal networks (`InternalAddresses.egressRefusal`).
  private(set) var governedByDefaults = false

  /// nil when the host is denied by policy.
  public init?(host: TrustHost, snapshot: RuntimeSnapshot) {
    guard let compiled = snapshot.rule(governing: host) else { return nil }
    self.host = host
    self.compiled = compiled
    parent = compiled.parent
    // A rule reached through includesSubdomains names the parent, not this
    // host, whose DNS may belong to someone else; `defaults` names nothing.
    namedExplicitly = compiled.namedHost == host
    governedByDefaults = compiled === snapshot.defaultRule
  }

  private init(plainHost: TrustHost, namedExplicitly: Bool, parent: ParentProxy?) {
    host = plainHost
    compiled = nil
    self.namedExplicitly = namedExplicitly
    self.parent = parent
  }

  /// A raw TCP route: the client does its own TLS end to end (passthrough),
  /// or a plain fetch; through `parent` when the governing rule (else
  /// `defaults`) names one.
  static func plain(
    _ host: TrustHost, namedExplicitly: Bool, governedBy rule: CompiledRule? = nil, parent: ParentProxy?
  ) -> UpstreamRoute {
    var route = UpstreamRoute(plainHost: host, namedExplicitly: namedExplicitly, parent: parent)
    route.governing = rule
    return route
  }

  public var ruleName: String { compiled?.name ?? "passthrough" }
  public var policy: CompiledPolicy? { compiled?.policy }
  public var context: TLSClientContext? { compiled?.context }
  /// A passthrough route carries whatever the client sends.
  public var allowsInsecureHTTPLoads: Bool { compiled?.allowsInsecureHTTPLoads ?? true }
  /// The CT logs and SCT count, for a rule with `requiresCertificateTransparency`.
  public var transparency: CTLogStore? { compiled?.transparency }
  /// Offer `h2` to the origin; never on a passthrough route, which speaks no HTTP of ours.
  public var offersHTTP2: Bool { compiled?.upstreamHTTP2 ?? false }
  /// The rule's dynamic pin list, when it has `dynamicPins`.
  var pinStore: DynamicPinStore? { compiled?.pinStore }
  /// The rule, for pin-failure reports (nil for defaults and passthrough).
  var rule: DomainConfig? { compiled?.domain }
  /// Where pin failures are reported (`report.uris`).
  var reportURIs: [InternalURL] { compiled?.reportURIs ?? [] }

  /// Whether TLS sessions may be resumed: not for a rule that requires
  /// certificate transparency, since a resumed handshake carries no SCTs.
  var resumesSessions: Bool { transparency == nil }

  /// The policy identity keying pools, sessions and the fingerprint cache,
  /// under the rule's pin list version in force now.
  public var identity: PolicyIdentity {
    guard let compiled else { return PolicyIdentity(generation: 0, rule: .passthrough) }
    return compiled.policy.identity.under(pinList: compiled.pinStore?.version ?? 0)
  }
}
