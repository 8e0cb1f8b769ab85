import PinConfig
import PinTLS
import PinTrust

/// Everything compiled for one domain rule, or for `defaults`, in one
/// immutable value: what the forward path needs of the rule that governs a
/// host. Built once per snapshot, so a route made for each request refers
/// to it instead of gathering a policy here, a TLS context there and a pin
/// store somewhere else by rule index.
public final class CompiledRule: Sendable {
  /// The `rule` log field and metric label: the rule's domain, or `defaults`.
  public let name: String
  /// The rule as configured; nil for `defaults`.
  public let domain: DomainConfig?
  public let policy: CompiledPolicy
  /// The rule's own `SSL_CTX` (TLS floor, forward secrecy, client identity).
  public let context: TLSClientContext
  /// The rule's dynamic pin list, when it has `dynamicPins`.
  public let pinStore: DynamicPinStore?
  /// Where pin failures are reported (`report.uris`).
  public let reportURIs: [InternalURL]
  /// The CT logs and SCT count, only for a rule with
  /// `requiresCertificateTransparency`: its presence is the requirement.
  public let transparency: CTLogStore?
  /// Offer `h2` to the origin (`upstreamHTTP2`, default true).
  public let upstreamHTTP2: Bool
  /// The host the rule names (its domain); nil for `defaults`, which names none.
  let namedHost: TrustHost?
  /// Plain `http://` may stay plain upstream only where the rule says so;
  /// `defaults` never allows it.
  public let allowsInsecureHTTPLoads: Bool
  /// The parent proxy every upstream connection of the rule goes through
  /// (`parentProxy`, else `defaults.parentProxy`); nil: direct.
  let parent: ParentProxy?

  /// A domain rule.
  init(
    domain: DomainConfig, policy: CompiledPolicy, context: TLSClientContext, pinStore: DynamicPinStore?,
    reportURIs: [InternalURL], logs: CTLogStore?, parent: ParentProxy? = nil
  ) {
    self.parent = parent
    name = domain.domain.description
    self.domain = domain
    self.policy = policy
    self.context = context
    self.pinStore = pinStore
    self.reportURIs = reportURIs
    transparency = domain.requiresCertificateTransparency ? logs : nil
    upstreamHTTP2 = domain.upstreamHTTP2
    allowsInsecureHTTPLoads = domain.allowsInsecureHTTPLoads
    namedHost = domain.domain
  }

  /// Whether the rule pins anything a splice would bypass: static pins (a
  /// pin mode, ATS identities) or a dynamic list.
  public var pins: Bool { policy.policy.hasStaticPins || pinStore != nil }

  /// `defaults`: no pins of its own beyond the policy, no reports, no CT,
  /// and `h2` offered as to any origin.
  init(defaults policy: CompiledPolicy, context: TLSClientContext, parent: ParentProxy? = nil) {
    self.parent = parent
    name = "defaults"
    domain = nil
    self.policy = policy
    self.context = context
    pinStore = nil
    reportURIs = []
    transparency = nil
    upstreamHTTP2 = true
    allowsInsecureHTTPLoads = false
    namedHost = nil
  }
}
