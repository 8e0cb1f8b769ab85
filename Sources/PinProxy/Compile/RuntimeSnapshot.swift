import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// Everything a connection needs from the configuration, compiled once and
/// immutable: the trust snapshot, one `CompiledRule` per domain rule (and
/// one for the defaults), connectTo mappings, timeouts and limits. A
/// connection keeps the snapshot it started with.
public final class RuntimeSnapshot: Sendable {
  public let configuration: Configuration
  public let trust: TrustSnapshot
  /// Each domain rule compiled, by its index in `trust.rules` (the
  /// configuration's order).
  public let rules: [CompiledRule]
  /// What governs a host no rule names; nil when `defaults.action` is deny.
  public let defaultRule: CompiledRule?
  public let timeouts: TimeoutsConfig
  public let limits: LimitsConfig
  public let httpLimits: HTTPLimits
  /// Client-facing TLS per intercepting listener (by name); empty without a CA.
  public let interception: [String: InterceptionContext]
  /// Each forward listener's passthrough hosts, compiled once (by name).
  let passthrough: [String: PassthroughList]
  /// `connectTo`, indexed by the logical host and port.
  let connectTo: [ConnectToKey: HostPort]
  /// What `defaults` may not reach (loopback, link-local, own listeners).
  let internalAddresses: InternalAddresses
  /// Every list store of the process (shared by all snapshots).
  public let pins: DynamicPinRegistry
  /// Who may use each listener (by name): client networks, proxy authentication.
  let access: [String: ListenerAccess]
  /// Who may use the admin endpoint; nil without one.
  let adminAccess: AdminAccess?
  /// Proxy authentication's cache and failure buckets (shared by all snapshots).
  let authState: ProxyAuthState
  /// Fetched revocation information and its fetches, shared across reloads.
  let revocation: RevocationState
  /// `defaults.parentProxy`: the parent of connections no rule governs (a
  /// passthrough host under `defaults: deny`, an internal fetch's plain URL).
  let defaultParent: ParentProxy?
  /// Forward routes by host name, made once per snapshot for every connection.
  let hostRoutes = HostRoutes()

  init(
    configuration: Configuration, trust: TrustSnapshot, rules: [CompiledRule], defaultRule: CompiledRule?,
    defaultParent: ParentProxy? = nil,
    interception: [String: InterceptionContext], pins: DynamicPinRegistry, access: [String: ListenerAccess],
    adminAccess: AdminAccess?, authState: ProxyAuthState, revocation: RevocationState
  ) {
    self.defaultParent = defaultParent
    self.interception = interception
    self.pins = pins
    self.access = access
    self.adminAccess = adminAccess
    self.authState = authState
    self.revocation = revocation
    var passthrough: [String: PassthroughList] = [:]
    for listener in configuration.listeners {
      passthrough[listener.name] = PassthroughList(
        listener.passthrough, withoutSNI: listener.passthroughWithoutSNI)
    }
    self.passthrough = passthrough
    var connectTo: [ConnectToKey: HostPort] = [:]
    // The first mapping of a host and port wins, as the list reads.
    for rule in configuration.connectTo {
      guard let host = TrustHost(rule.from.host) else { continue }
      let key = ConnectToKey(host: host, port: rule.from.port)
      if connectTo[key] == nil { connectTo[key] = rule.to }
    }
    self.connectTo = connectTo
    internalAddresses = InternalAddresses(
      listening: configuration.listeners.map(\.address) + (configuration.admin.map { [$0.address] } ?? []),
      local: SocketAddress.localInterfaceAddresses(), allowedNetworks: configuration.defaults.allowedNetworks)
    self.configuration = configuration
    self.trust = trust
    self.rules = rules
    self.defaultRule = defaultRule
    timeouts = configuration.timeouts
    limits = configuration.limits
    httpLimits = HTTPLimits(
      maxHeaderBytes: configuration.limits.maxHeaderBytes,
      maxHeaderCount: configuration.limits.maxHeaderCount,
      maxURILength: configuration.limits.maxURILength)
  }

  public var generation: UInt64 { trust.generation }

  /// The compiled rule that governs `host`: the domain rule the table
  /// routes it to, else the defaults; nil when the host is denied.
  func rule(governing host: TrustHost) -> CompiledRule? {
    if let entry = trust.rules.lookup(host) { return rules[entry.rule] }
    return defaultRule
  }

  /// The list in force for rule `index`, nil for a rule without `dynamicPins`.
  public func dynamicPins(forRule index: Int) -> DynamicPinRequirement? {
    guard rules.indices.contains(index) else { return nil }
    return rules[index].pinStore?.requirement().0
  }

  /// The pin list stores of the rules with `dynamicPins`, in rule order.
  var pinStores: [DynamicPinStore] { rules.compactMap(\.pinStore) }

  /// Where to actually connect for `host:port` (curl's --connect-to
  /// semantics), and whether a `connectTo` mapping chose it.
  public func connectAddress(host: TrustHost, port: Int) -> (address: HostPort, mapped: Bool) {
    if let mapped = connectTo[ConnectToKey(host: host, port: port)] { return (mapped, true) }
    var name = host.description
    if name.hasPrefix("[") { name = String(name.dropFirst().dropLast()) }
    return (HostPort(host: name, port: port), false)
  }

  /// Listeners that terminate client TLS and so need the local CA.
  public static func needsLocalCA(_ configuration: Configuration) -> Bool {
    configuration.listeners.contains(where: \.terminatesClientTLS)
  }

  /// - Parameters:
  ///   - ca: the local CA; without one, intercepting listeners answer
  ///     CONNECT with 502 (and `check` needs none).
  ///   - pins: the process's pin list stores; a reload passes the running
  ///     snapshot's, so that lists survive it.
  ///   - revocation: fetched revocation information; a reload passes the
  ///     running snapshot's, the daemon's first snapshot one that keeps CRLs
  ///     in the state directory (`check` and `evaluate` fetch nothing).
  ///   - warn: told about stored pin lists that were ignored.
  public static func compile(
    _ configuration: Configuration, generation: UInt64, systemOverride: [X509Certificate]? = nil,
    ca: LocalCA? = nil, pins: DynamicPinRegistry = DynamicPinRegistry(), authState: ProxyAuthState? = nil,
    revocation: RevocationState? = nil, warn: (String) -> Void = { _ in }
  ) throws(ConfigErrors) -> RuntimeSnapshot {
    let authState = authState ?? ProxyAuthState()
    // Without the daemon's state nothing is fetched: what is at hand decides.
    let offline = revocation == nil
    let revocation = revocation ?? RevocationState()
    let trust = try TrustSnapshot.compile(
      configuration, generation: generation, systemOverride: systemOverride,
      fetched: offline ? nil : revocation.fetched, counters: revocation.counters)
    var errors: [ConfigError] = []
    var specs: [Int: DynamicPinSpec] = [:]
    var reportURIs: [Int: [InternalURL]] = [:]
    for (index, domain) in configuration.domains.enumerated() {
      if let dynamic = domain.dynamicPins {
        switch DynamicPinSpec.compile(dynamic, domain: domain, configuration: configuration) {
        case .success(let spec): specs[index] = spec
        case .failure(let failure): errors += failure.errors
        }
      }
      for (uri, location) in domain.report?.uris ?? [] {
        guard let url = InternalURL(uri) else {
          errors.append(
            ConfigError(
              file: configuration.file, at: location,
              message: "\"\(uri)\" is not an http:// or https:// URL with a host"))
          continue
        }
        reportURIs[index, default: []].append(url)
      }
    }
    var contexts: [TLSClientContext] = []
    for domain in configuration.domains {
      var identity: ClientIdentity?
      if let config = domain.clientIdentity {
        do {
          identity = try ClientIdentity(
            pkcs12Path: config.pkcs12.path, passphraseFile: config.passphraseFile.path)
        } catch {
          errors.append(
            ConfigError(file: configuration.file, at: config.pkcs12.location, message: error.description))
        }
      }
      do {
        contexts.append(
          try TLSClientContext(
            minimumVersion: domain.minimumTLSVersion, requiresForwardSecrecy: domain.requiresForwardSecrecy,
            identity: identity, requestsTransparency: domain.requiresCertificateTransparency))
      } catch {
        errors.append(
          ConfigError(
            file: configuration.file, at: domain.location, message: "cannot set up TLS: \(error.description)")
        )
      }
    }
    let defaultContext: TLSClientContext
    do {
      defaultContext = try TLSClientContext(
        minimumVersion: configuration.defaults.minimumTLSVersion,
        requiresForwardSecrecy: configuration.defaults.requiresForwardSecrecy)
    } catch {
      throw ConfigErrors(
        errors: [
          ConfigError(
            file: configuration.file, line: 0, column: 0, key: "defaults", message: error.description)
        ])
    }
    // Client certificate requirements are read whether or not there is a
    // CA, so that `check` reports a bad `downstreamClientCA` file too.
    var clientCertificates: [String: ClientCertificateRequirement] = [:]
    for listener in configuration.listeners {
      guard let file = listener.downstreamClientCA else { continue }
      do {
        let names = listener.allowedClientNames ?? ClientNamesConfig()
        clientCertificates[listener.name] = ClientCertificateRequirement(
          anchors: try CertificateFile.load(file.path), commonNames: names.commonNames,
          dnsNames: names.dnsNames, uris: names.uris)
      } catch {
        errors.append(ConfigError(file: configuration.file, at: file.location, message: error.description))
      }
    }
    var interception: [String: InterceptionContext] = [:]
    if let ca {
      for listener in configuration.listeners where listener.terminatesClientTLS {
        do {
          interception[listener.name] = try InterceptionContext(
            ca: ca, minimumVersion: listener.downstream.minimumTLSVersion,
            ciphers: listener.downstream.ciphers,
            // A tunnel listener relays bytes: what the client speaks inside
            // TLS must be what its upstream speaks, so it stays HTTP/1.1.
            offersHTTP2: listener.mode != .tunnel && listener.downstream.http2,
            clientCertificates: clientCertificates[listener.name])
        } catch {
          errors.append(
            ConfigError(
              file: configuration.file, line: 0, column: 0, key: "listeners.\(listener.name).downstream",
              message: error.description))
        }
      }
    }
    var access: [String: ListenerAccess] = [:]
    for listener in configuration.listeners {
      do {
        access[listener.name] = try ListenerAccess(listener, authState: authState)
      } catch {
        let location = listener.proxyAuth?.htpasswd.location
        errors.append(
          location.map { ConfigError(file: configuration.file, at: $0, message: error.description) }
            ?? ConfigError(
              file: configuration.file, line: 0, column: 0, key: "listeners.\(listener.name)",
              message: error.description))
      }
    }
    var adminAccess: AdminAccess?
    if let admin = configuration.admin {
      do {
        adminAccess = try AdminAccess(admin)
      } catch {
        let location = admin.tokenFile?.location ?? Location(line: 0, column: 0, key: "admin")
        errors.append(ConfigError(file: configuration.file, at: location, message: error.description))
      }
    }
    var parents: [String: ParentProxy] = [:]
    for parent in configuration.parentProxies {
      do {
        parents[parent.name] = try ParentProxy(parent)
      } catch {
        errors.append(
          ConfigError(
            file: configuration.file, at: parent.credentialsFile?.location ?? parent.location,
            message: error.description))
      }
    }
    func parent(_ choice: ParentChoice) -> ParentProxy? {
      if case .parent(let name) = choice { parents[name] } else { nil }
    }
    guard errors.isEmpty else { throw ConfigErrors(errors: errors) }
    // Only a configuration that compiled touches the stores.
    let now = Date()
    // Without errors every rule has its policy and context, at its own index.
    let rules = configuration.domains.indices.map { index in
      CompiledRule(
        domain: configuration.domains[index], policy: trust.domainPolicies[index], context: contexts[index],
        pinStore: specs[index].map { pins.store(for: $0, at: now, warn: warn) },
        reportURIs: reportURIs[index] ?? [], logs: trust.transparency,
        parent: parent(configuration.domains[index].parentProxy ?? configuration.defaults.parentProxy))
    }
    let defaultParent = parent(configuration.defaults.parentProxy)
    return RuntimeSnapshot(
      configuration: configuration, trust: trust, rules: rules,
      defaultRule: trust.defaultPolicy.map {
        CompiledRule(defaults: $0, context: defaultContext, parent: defaultParent)
      },
      defaultParent: defaultParent,
      interception: interception, pins: pins, access: access, adminAccess: adminAccess, authState: authState,
      revocation: revocation)
  }

  /// The embedded default: one forward listener on 127.0.0.1:3128, system
  /// anchors, TLS 1.2+, forward secrecy.
  public static var defaultConfiguration: Configuration {
    var configuration = Configuration(file: "<embedded default>")
    configuration.listeners = [
      ListenerConfig(name: "forward", address: HostPort(host: "127.0.0.1", port: 3128), mode: .forward)
    ]
    return configuration
  }
}

struct ConnectToKey: Hashable, Sendable {
  let host: TrustHost
  let port: Int
}

extension RuntimeSnapshot {
  /// How much a refused client of `listener` is told, under this snapshot:
  /// a reload may set `refusalDetail`, but its default follows the address
  /// actually bound (`listener`, from start), never a reloaded address
  /// that is not in force: a public listener whose file now says loopback
  /// still answers with a summary.
  func refusalDetail(for listener: ListenerConfig) -> ListenerConfig.RefusalDetail {
    configuration.listeners.first { $0.name == listener.name }?.refusalDetailSetting ?? listener.refusalDetail
  }

  /// Who may use the running `listener` under this snapshot.
  func access(for listener: ListenerConfig) -> ListenerAccess {
    guard let access = access[listener.name], access.address == listener.address, access.mode == listener.mode
    else { return .closed }
    return access
  }
}

extension RuntimeSnapshot {
  /// The local CA's certificate file, for the hint a client that does not
  /// trust it is logged with.
  var localCACertificate: String {
    configuration.localCA?.certificate.path
      ?? StateDirectory.resolve(configuration.stateDirectory) + "/" + LocalCA.certificateFile
  }
}
