import Foundation
import PinTrust

/// The parsed configuration file (docs/CONTRACTS.md, configuration): plain
/// values with the location of anything that is checked later (files, pins),
/// so that a later error still names file, line and key.
public struct Configuration: Sendable {
  public var file: String
  public var listeners: [ListenerConfig] = []
  public var admin: AdminConfig?
  public var stateDirectory: String?
  public var connectTo: [ConnectToRule] = []
  public var anchorSets: [AnchorSetConfig] = []
  public var defaults = DefaultsConfig()
  public var domains: [DomainConfig] = []
  public var timeouts = TimeoutsConfig()
  public var limits = LimitsConfig()
  /// Event loops to run; 0 means one per core.
  public var eventLoops = 0
  /// An operator-supplied CA for interception; nil: one in the state directory.
  public var localCA: LocalCAConfig?
  public var logging = LoggingConfig()
  /// The CT log list and SCT count for rules with `requiresCertificateTransparency`.
  public var certificateTransparency: TransparencyConfig?
  /// Named parent proxies a rule's `parentProxy` (or `defaults.parentProxy`) chooses.
  public var parentProxies: [ParentProxyConfig] = []

  public init(file: String) { self.file = file }
}

/// `certificateTransparency`: the logs the proxy knows and how many distinct
/// ones must have signed an SCT for a certificate.
public struct TransparencyConfig: Sendable {
  public var logList: ConfigPath
  public var minimumSCTs = 2
  public var location: Location
}

public struct LoggingConfig: Sendable {
  public enum Level: String, Sendable, CaseIterable { case debug, info, warn, error }
  /// How a log line is written: `key=value` text, or one JSON object.
  public enum Format: String, Sendable, CaseIterable { case text, json }
  public var level = Level.info
  /// nil: text on a terminal, JSON when standard error is the journal.
  public var format: Format?
  /// One line per request at info level.
  public var access = true
  /// Query strings in log lines and on the operator's page; off by default,
  /// because tokens travel there.
  public var queryStrings = false

  public init() {}
}

public struct LocalCAConfig: Sendable {
  public var certificate: ConfigPath
  public var key: ConfigPath
}

/// Every timer of the data path, in seconds.
public struct TimeoutsConfig: Sendable, Equatable {
  /// A client must finish sending a request head within this.
  public var clientHeader: Double = 30
  /// An idle keep-alive client connection is closed after this.
  public var idleKeepAlive: Double = 60
  public var upstreamConnect: Double = 10
  public var tlsHandshake: Double = 10
  /// From the request head sent upstream to the response head received.
  public var upstreamResponse: Double = 60
  /// An idle pooled upstream connection is closed after this.
  public var upstreamIdle: Double = 60
  /// A tunnel with no bytes either way is closed after this.
  public var tunnelIdle: Double = 300
  /// On SIGTERM, in-flight requests may finish within this; then the process exits.
  public var drain: Double = 30
  /// After an early answer (a refusal while the client may still be
  /// sending), the client's remaining bytes are read and discarded for at
  /// most this long before the socket closes (RFC 9112 §9.6).
  public var lingeringClose: Double = 30

  public init() {}
}

public struct LimitsConfig: Sendable, Equatable {
  public var maxConnections = 4096
  /// Open connections from one client address; keeps one client from
  /// holding every slot. Loopback clients share one address, so under
  /// pressure the idle and slowest connections are also closed first.
  public var maxConnectionsPerClient = 1024
  public var maxHeaderBytes = 64 * 1024
  public var maxHeaderCount = 100
  public var maxURILength = 8 * 1024
  /// Idle pooled connections kept per upstream (host, port, policy generation).
  public var maxIdlePerUpstream = 8
  /// The most bytes read and discarded while closing lingeringly.
  public var lingeringCloseBytes = 64 * 1024 * 1024

  public init() {}
}

/// Where a value was written.
public struct Location: Sendable, Equatable {
  public var line: Int
  public var column: Int
  public var key: String

  public init(line: Int, column: Int, key: String) {
    self.line = line
    self.column = column
    self.key = key
  }
}

/// A file path from the config, resolved against the config's directory.
public struct ConfigPath: Sendable, Equatable {
  public var path: String
  public var location: Location

  public init(path: String, location: Location) {
    self.path = path
    self.location = location
  }
}

public struct HostPort: Sendable, Equatable, CustomStringConvertible {
  public var host: String
  public var port: Int

  public init(host: String, port: Int) {
    self.host = host
    self.port = port
  }

  public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

  /// The IP literal to bind or compare for a listening address: `localhost`
  /// means IPv4 loopback (listeners never resolve names).
  public var listeningIP: String { host == "localhost" ? "127.0.0.1" : host }
}

public struct ListenerConfig: Sendable {
  public enum Mode: String, Sendable, CaseIterable { case forward, tunnel, socks5 }
  public var name: String
  public var address: HostPort
  public var mode: Mode
  public var intercept = true
  public var passthrough: [String] = []
  /// The `passthrough` entries written `{host: …, allowsMissingSNI: true}`:
  /// their tunnels may open with a ClientHello that names no host.
  public var passthroughWithoutSNI: [String] = []
  /// Where each `passthrough` entry is written, in the same order.
  public var passthroughLocations: [Location] = []
  public var downstream = DownstreamTLSConfig()
  public var upstream: HostPort?
  public var downstreamTLS = false
  /// Ports CONNECT may reach; anything else is refused (no open relay).
  /// Ports a client may reach through this listener, by CONNECT or by an
  /// absolute-form URL alike (the URL's port, before any `connectTo`).
  public var allowedConnectPorts: [Int] = [443, 80]
  /// `allowedClients` as written; nil when the listener names none.
  public var allowedClients: ClientAddressRules?
  public var allowedClientsLocation: Location?
  /// `allowedUsers`, names resolved to uids at load (and reload): the only
  /// users whose programs on this host may connect; nil when not set.
  public var allowedUsers: [UInt32]?
  public var allowedUsersLocation: Location?
  /// Forward listeners: answer `GET /proxy.pac` and `/wpad.dat` with a
  /// proxy auto-config file written from the policy.
  public var pac = true
  /// Forward listeners: HTTP Basic proxy authentication.
  public var proxyAuth: ProxyAuthConfig?
  /// Tunnel listeners with `downstreamTLS`: a client certificate from this CA is required.
  public var downstreamClientCA: ConfigPath?
  /// With `downstreamClientCA`: the names a client certificate must carry.
  public var allowedClientNames: ClientNamesConfig?
  /// How much a refused client is told: `full` (the reason with expected
  /// and presented pins) or `summary` (code, one line, incident id).
  public enum RefusalDetail: String, Sendable, CaseIterable { case full, summary }
  /// nil: `full` on a loopback address (the client is the operator's own
  /// machine), `summary` elsewhere.
  public var refusalDetailSetting: RefusalDetail?
  public var refusalDetail: RefusalDetail {
    get { refusalDetailSetting ?? (address.isLoopback ? .full : .summary) }
    set { refusalDetailSetting = newValue }
  }

  /// Who may connect: the listener's `allowedClients`; without them
  /// loopback on a loopback address, and anyone on another address (which
  /// the parser allows only when the listener authenticates its clients
  /// with `proxyAuth` or `downstreamClientCA`).
  public var effectiveAllowedClients: ClientAddressRules {
    allowedClients ?? (address.isLoopback ? .loopback : .everyone)
  }

  /// Whether this listener terminates client TLS (and so needs the local CA):
  /// an intercepting forward listener, or a tunnel with `downstreamTLS`.
  public var terminatesClientTLS: Bool { mode == .tunnel ? downstreamTLS : intercept }

  public init(name: String, address: HostPort, mode: Mode) {
    self.name = name
    self.address = address
    self.mode = mode
  }
}

public struct DownstreamTLSConfig: Sendable {
  public var minimumTLSVersion: TLSVersion = .tls12
  public var ciphers = ""
  /// Offer `h2` (beside `http/1.1`) to intercepted clients of a forward listener.
  public var http2 = true
}

public struct AdminConfig: Sendable {
  public var address: HostPort
  /// Who may connect; nil: loopback on a loopback address, else anyone
  /// with the token (the parser requires one of the two off loopback).
  public var allowedClients: ClientAddressRules?
  /// A file holding the bearer token every request must carry
  /// (`Authorization: Bearer …`), except `/metrics` and `/healthz` from
  /// `metricsClients`.
  public var tokenFile: ConfigPath?
  /// Scrapers that may read `/metrics` and `/healthz` without the token.
  public var metricsClients: ClientAddressRules?

  public init(address: HostPort) { self.address = address }

  /// Whose requests are served: `allowedClients`, else the default above.
  public var effectiveAllowedClients: ClientAddressRules {
    allowedClients ?? (address.isLoopback || tokenFile == nil ? .loopback : .everyone)
  }

  /// Who may connect at all: the served clients and the scrapers.
  public var connectingClients: ClientAddressRules {
    ClientAddressRules(effectiveAllowedClients.blocks + (metricsClients?.blocks ?? []))
  }
}

/// `HOST:PORT:ADDR:PORT`, as curl's `--connect-to`.
public struct ConnectToRule: Sendable, Equatable {
  public var from: HostPort
  public var to: HostPort

  public init(from: HostPort, to: HostPort) {
    self.from = from
    self.to = to
  }
}

public struct AnchorSetConfig: Sendable {
  public var name: String
  public var files: [ConfigPath]
  public var location: Location
  /// CRLs of the set's CAs (DER or PEM), re-read on reload.
  public var crls: [ConfigPath] = []
}

public struct DefaultsConfig: Sendable {
  public enum Action: String, Sendable, CaseIterable { case validate, deny }
  public var action: Action = .validate
  public var minimumTLSVersion: TLSVersion = .tls12
  public var requiresForwardSecrecy = true
  public var revocation = RevocationSettings.default
  /// What rules without their own `parentProxy` use.
  public var parentProxy = ParentChoice.direct
  /// Internal networks `defaults` may reach after all (the egress guard
  /// refuses private, shared, link-local and other special-purpose ranges
  /// for hosts no rule names); empty: none.
  public var allowedNetworks: [AddressBlock] = []
  public var allowedNetworksLocation: Location?
}

public struct DomainConfig: Sendable {
  public var domain: TrustHost
  public var location: Location
  public var includesSubdomains = false
  public var anchors: [String] = [SecurityPolicy.systemAnchors]
  public var anchorsLocation: Location?
  public var pinningMode: PinningMode = .none
  public var pinnedCertificates: [ConfigPath] = []
  public var pinnedPublicKeyHashes: [Digest256] = []
  /// Where each pin list key (`pinnedPublicKeyHashes`, `pinnedLeafPublicKeyHashes`,
  /// `pinnedCAPublicKeyHashes`) is written, for advice that names the line to edit.
  public var pinKeyLocations: [String: Location] = [:]
  public var validatesDomainName = true
  public var allowInvalidCertificates = false
  public var minimumTLSVersion: TLSVersion = .tls12
  public var requiresForwardSecrecy = true
  public var allowsInsecureHTTPLoads = false
  public var clientIdentity: ClientIdentityConfig?
  public var dynamicPins: DynamicPinsConfig?
  public var report: ReportConfig?
  /// ATS `NSPinnedLeafIdentities` / `NSPinnedCAIdentities` (SPKI SHA-256).
  public var pinnedLeafPublicKeyHashes: [Digest256] = []
  public var pinnedCAPublicKeyHashes: [Digest256] = []
  /// How hard to look for revocation information (`RevocationSettings`).
  public var revocation = RevocationSettings.default
  /// After this instant the rule's static pins are not enforced (fail open).
  public var pinsExpire: Date?
  public var pinsExpireLocation: Location?
  /// ATS `NSRequiresCertificateTransparency`.
  public var requiresCertificateTransparency = false
  /// nil: as `defaults.parentProxy`.
  public var parentProxy: ParentChoice?
  /// Offer `h2` (beside `http/1.1`) to this rule's origins.
  public var upstreamHTTP2 = true
  public var requiresCertificateTransparencyLocation: Location?
}

public struct ClientIdentityConfig: Sendable {
  public var pkcs12: ConfigPath
  public var passphraseFile: ConfigPath
}

public struct DynamicPinsConfig: Sendable {
  public var url: String
  public var urlLocation: Location
  public var publicKey: String
  public var publicKeyLocation: Location
  public var useChallenge = false
  public var expectedCommonNames: [String] = []
  public var updateInterval: Double = 7 * 86_400
  public var expirationUpdateThreshold: Double = 14 * 86_400
  public var fallback: ConfigPath?

  public init(url: String, urlLocation: Location, publicKey: String, publicKeyLocation: Location) {
    self.url = url
    self.urlLocation = urlLocation
    self.publicKey = publicKey
    self.publicKeyLocation = publicKeyLocation
  }
}

public struct ReportConfig: Sendable {
  public var enforce = true
  /// Each URI with where it was written.
  public var uris: [(uri: String, location: Location)] = []
}
