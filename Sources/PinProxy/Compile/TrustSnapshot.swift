import Foundation
import PinConfig
import PinTLS
import PinTrust

/// The trust half of a configuration, compiled: every anchor store and pinned
/// certificate parsed once, one `CompiledPolicy` per domain rule, and the
/// table that routes a host to its rule. Immutable; a reload builds a new
/// snapshot with the next generation and swaps it in whole.
public final class TrustSnapshot: Sendable {
  public let generation: UInt64
  public let rules: DomainTable<Int>
  public let domainPolicies: [CompiledPolicy]
  public let domainConfigs: [DomainConfig]
  /// nil when `defaults.action` is deny.
  public let defaultPolicy: CompiledPolicy?
  public let defaults: DefaultsConfig
  public let registry: AnchorSetRegistry
  /// The CT log list (`certificateTransparency`), loaded once; nil without one.
  public let transparency: CTLogStore?

  /// What governs a host.
  public enum Route: Sendable {
    case rule(index: Int, domain: DomainConfig, policy: CompiledPolicy)
    case defaults(CompiledPolicy)
    case denied
  }

  init(
    generation: UInt64, rules: DomainTable<Int>, domainPolicies: [CompiledPolicy],
    domainConfigs: [DomainConfig],
    defaultPolicy: CompiledPolicy?, defaults: DefaultsConfig, registry: AnchorSetRegistry,
    transparency: CTLogStore?
  ) {
    self.transparency = transparency
    self.generation = generation
    self.rules = rules
    self.domainPolicies = domainPolicies
    self.domainConfigs = domainConfigs
    self.defaultPolicy = defaultPolicy
    self.defaults = defaults
    self.registry = registry
  }

  public func route(_ host: TrustHost) -> Route {
    if let entry = rules.lookup(host) {
      return .rule(index: entry.rule, domain: domainConfigs[entry.rule], policy: domainPolicies[entry.rule])
    }
    if let defaultPolicy { return .defaults(defaultPolicy) }
    return .denied
  }

  /// Compiles `configuration`. Every file it names is read and parsed here;
  /// each problem is reported with the file, line and key that named it.
  /// - Parameter systemOverride: certificates that stand in for `system`
  ///   (nil: the OS store).
  /// - Parameter fetched: revocation information the daemon fetched,
  ///   shared across snapshots (nil offline).
  public static func compile(
    _ configuration: Configuration, generation: UInt64, systemOverride: [X509Certificate]? = nil,
    fetched: FetchedRevocation? = nil, counters: RevocationCounters? = nil, at time: Date = Date()
  ) throws(ConfigErrors) -> TrustSnapshot {
    var errors: [ConfigError] = []
    func fail(_ location: Location, _ message: String) {
      errors.append(ConfigError(file: configuration.file, at: location, message: message))
    }
    func load(_ path: ConfigPath) -> [X509Certificate] {
      do {
        return try CertificateFile.load(path.path)
      } catch {
        fail(path.location, error.description)
        return []
      }
    }

    var sets: [String: [X509Certificate]] = [:]
    var crls: [String: CRLSet] = [:]
    for set in configuration.anchorSets {
      sets[set.name] = set.files.flatMap(load)
      var entries: [CRLSet.Entry] = []
      for path in set.crls {
        do {
          entries.append(CRLSet.Entry(path: path.path, crl: try CRLSet.load(path.path, at: time)))
        } catch {
          fail(path.location, "\(error)")
        }
      }
      let crlSet = CRLSet(entries)
      // A CRL from one of the set's own CAs must verify under it now; one
      // from an intermediate is checked when a chain brings it.
      for (path, problem) in crlSet.defects(against: sets[set.name] ?? []) {
        let location = set.crls.first { $0.path == path }?.location ?? set.location
        fail(location, "\(path): \(problem)")
      }
      crls[set.name] = crlSet
    }
    let registry = AnchorSetRegistry(sets: sets, crls: crls, systemOverride: systemOverride)

    var table = DomainTable<Int>()
    var policies: [CompiledPolicy] = []
    for (index, domain) in configuration.domains.enumerated() {
      do {
        try registry.validate(domain.anchors)
      } catch {
        fail(domain.anchorsLocation ?? domain.location, error.description)
        continue
      }
      let pinned = domain.pinnedCertificates.flatMap(load).map { $0.value() }
      var policy = SecurityPolicy(
        pinningMode: domain.pinningMode, pinnedCertificates: pinned,
        pinnedPublicKeyHashes: domain.pinnedPublicKeyHashes,
        validatesDomainName: domain.validatesDomainName,
        allowInvalidCertificates: domain.allowInvalidCertificates,
        anchors: domain.anchors, enforcesPins: domain.report?.enforce ?? true,
        pinnedLeafPublicKeyHashes: domain.pinnedLeafPublicKeyHashes,
        pinnedCAPublicKeyHashes: domain.pinnedCAPublicKeyHashes, pinsExpire: domain.pinsExpire)
      policy.revocation = domain.revocation
      do {
        let compiled = try CompiledPolicy(
          policy: policy, identity: PolicyIdentity(generation: generation, rule: .domain(index)),
          registry: registry, fetched: fetched, counters: counters)
        try table.insert(
          domain: domain.domain, includesSubdomains: domain.includesSubdomains, rule: policies.count)
        policies.append(compiled)
      } catch {
        fail(domain.location, "\(error)")
      }
    }

    var defaultPolicy: CompiledPolicy?
    if configuration.defaults.action == .validate {
      do {
        var policy = SecurityPolicy.default
        policy.revocation = configuration.defaults.revocation
        defaultPolicy = try CompiledPolicy(
          policy: policy, identity: PolicyIdentity(generation: generation, rule: .defaults),
          registry: registry, fetched: fetched, counters: counters)
      } catch {
        fail(Location(line: 0, column: 0, key: "defaults"), "\(error)")
      }
    }
    var transparency: CTLogStore?
    if let ct = configuration.certificateTransparency {
      do {
        transparency = try CTLogStore(file: ct.logList.path, minimumSCTs: ct.minimumSCTs)
      } catch {
        fail(ct.logList.location, error.description)
      }
    } else if let domain = configuration.domains.first(where: \.requiresCertificateTransparency) {
      fail(
        domain.requiresCertificateTransparencyLocation ?? domain.location,
        "requiresCertificateTransparency needs the top-level certificateTransparency: {logList: FILE}")
    }
    guard errors.isEmpty else { throw ConfigErrors(errors: errors) }
    return TrustSnapshot(
      generation: generation, rules: table, domainPolicies: policies, domainConfigs: configuration.domains,
      defaultPolicy: defaultPolicy, defaults: configuration.defaults, registry: registry,
      transparency: transparency)
  }
}
