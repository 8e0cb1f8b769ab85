import PinConfig
import PinTLS
import PinTrust

/// What governs one upstream host: the policy, its TLS context and the
/// transport rules, resolved from the snapshot.
public struct UpstreamRoute: Sendable {
  public let host: TrustHost
  public let ruleName: String
  /// nil only for plain TCP routes (passthrough), which never carry TLS of ours.
  public let policy: CompiledPolicy?
  public let context: TLSClientContext?
  public let allowsInsecureHTTPLoads: Bool
  /// The rule's dynamic pin list, when it has `dynamicPins`.
  let pinStore: DynamicPinStore?
  /// The rule, for pin-failure reports (nil for defaults and passthrough).
  let rule: DomainConfig?
  /// Where pin failures are reported (`report.uris`).
  let reportURIs: [InternalURL]
  /// The CT logs and SCT count, for a rule with `requiresCertificateTransparency`.
  public let transparency: CTLogStore?
  /// Whether configuration named this host explicitly (a domain rule or a
  /// passthrough entry for exactly this name, a tunnel's upstream). Only then may it resolve to a
  /// loopback, link-local or own-listener address (`InternalAddresses`).
  public var namedExplicitly: Bool
  /// Offer `h2` to the origin (`upstreamHTTP2`, default true).
  public let offersHTTP2: Bool

  /// nil when the host is denied by policy.
  public init?(host: TrustHost, snapshot: RuntimeSnapshot) {
    self.host = host
    switch snapshot.trust.route(host) {
    case .rule(let index, let domain, let policy):
      ruleName = domain.domain.description
      self.policy = policy
      context = snapshot.ruleContexts[index]
      allowsInsecureHTTPLoads = domain.allowsInsecureHTTPLoads
      pinStore = snapshot.pinStores[index]
      rule = domain
      reportURIs = snapshot.reportURIs[index] ?? []
      transparency = domain.requiresCertificateTransparency ? snapshot.trust.transparency : nil
      // A rule reached through includesSubdomains names the parent, not this
      // host, whose DNS may belong to someone else.
      namedExplicitly = domain.domain == host
      offersHTTP2 = domain.upstreamHTTP2
    case .defaults(let policy):
      ruleName = "defaults"
      self.policy = policy
      context = snapshot.defaultContext
      allowsInsecureHTTPLoads = false
      pinStore = nil
      rule = nil
      reportURIs = []
      transparency = nil
      namedExplicitly = false
      offersHTTP2 = true
    case .denied:
      return nil
    }
  }

  private init(plainHost: TrustHost, namedExplicitly: Bool) {
    host = plainHost
    ruleName = "passthrough"
    policy = nil
    context = nil
    allowsInsecureHTTPLoads = true
    pinStore = nil
    rule = nil
    reportURIs = []
    transparency = nil
    self.namedExplicitly = namedExplicitly
    offersHTTP2 = false
  }

  /// Whether TLS sessions may be resumed: not for a rule that requires
  /// certificate transparency, since a resumed handshake carries no SCTs.
  var resumesSessions: Bool { transparency == nil }

  /// The policy identity keying pools, sessions and the fingerprint cache,
  /// under the rule's pin list version in force now.
  public var identity: PolicyIdentity {
    guard let policy else { return PolicyIdentity(generation: 0, rule: .passthrough) }
    return policy.identity.under(pinList: pinStore?.version ?? 0)
  }

  /// A raw TCP route: the client does its own TLS end to end (passthrough).
  static func plain(_ host: TrustHost, namedExplicitly: Bool) -> UpstreamRoute {
    UpstreamRoute(plainHost: host, namedExplicitly: namedExplicitly)
  }
}
