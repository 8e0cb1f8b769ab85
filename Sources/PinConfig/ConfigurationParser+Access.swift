/// Who may use a listener: `allowedClients`, `proxyAuth`, client
/// certificates, and the admin listener's rules. Fail closed: a listener
/// or admin endpoint on an address other than loopback must say who may use
/// it, or the configuration does not load ("would be an open proxy").
extension ConfigurationParser {
  static func parseAddressRules(_ node: ConfigNode) -> ClientAddressRules? {
    guard let entries = node.sequence else { return nil }
    var blocks: [AddressBlock] = []
    for entry in entries {
      guard let text = entry.string else { continue }
      switch AddressBlock.parse(text) {
      case .success(let block): blocks.append(block)
      case .failure(let error): entry.error(error.description)
      }
    }
    if entries.isEmpty { node.error("an empty list allows no client; remove the key or name a network") }
    return ClientAddressRules(blocks)
  }

  /// The access keys of one listener; `mapping` is the listener's.
  static func parseListenerAccess(_ mapping: ConfigMapping, into listener: inout ListenerConfig, file: String)
  {
    if let node = mapping["allowedClients"] { listener.allowedClients = parseAddressRules(node) }
    if let node = mapping["allowedUsers"] {
      listener.allowedUsers = parseUsers(node)
      listener.allowedUsersLocation = Location(line: node.line, column: node.column, key: node.path)
      if !listener.address.isLoopback, mapping["allowedClients"] == nil, mapping["proxyAuth"] == nil,
        mapping["downstreamClientCA"] == nil
      {
        node.error(
          "listener \(listener.name) is not on loopback: peers from other hosts have no local user, so"
            + " allowedUsers alone would not say who they may be; add allowedClients or proxyAuth")
      }
    }
    if let node = mapping["proxyAuth"] {
      listener.proxyAuth = parseProxyAuth(node, file: file)
      if listener.mode == .tunnel {
        node.error(
          "proxy authentication is for forward and socks5 listeners; a tunnel listener takes downstreamClientCA"
        )
      }
    }
    if let node = mapping["downstreamClientCA"] {
      listener.downstreamClientCA = configPath(node, file: file)
      if listener.mode != .tunnel || !listener.downstreamTLS {
        node.error("client certificates are checked by tunnel listeners with downstreamTLS: true")
      }
    }
    if let node = mapping["allowedClientNames"] {
      listener.allowedClientNames = parseClientNames(node)
      if mapping["downstreamClientCA"] == nil {
        node.error("needs downstreamClientCA: names are checked on certificates verified against it")
      }
    }
    guard !listener.address.isLoopback, listener.allowedClients == nil, listener.proxyAuth == nil,
      listener.downstreamClientCA == nil, let address = mapping["address"]
    else { return }
    let ways =
      listener.mode != .tunnel
      ? "allowedClients (the networks that may use it) or proxyAuth (an htpasswd file), or both"
      : "allowedClients (the networks that may use it) or downstreamClientCA, or both"
    address.error(
      "listener \(listener.name) on \(listener.address) would be an open proxy: a listener on an address"
        + " other than loopback must name \(ways); allowedClients: [\"0.0.0.0/0\", \"::/0\"] opens it"
        + " to everyone on purpose")
  }

  /// `allowedUsers`: user names (resolved now, so a reload picks up a
  /// renamed user) or numeric uids.
  static func parseUsers(_ node: ConfigNode) -> [UInt32]? {
    guard let entries = node.sequence else { return nil }
    if entries.isEmpty { node.error("an empty list allows no user; remove the key or name a user") }
    var uids: [UInt32] = []
    for entry in entries {
      guard let text = entry.string else { continue }
      if let uid = UInt32(text) {
        uids.append(uid)
      } else if let uid = LocalUsers.uid(of: text) {
        uids.append(uid)
      } else {
        entry.error("no user \"\(text)\" on this host (a user name, or a numeric uid)")
      }
    }
    return uids
  }

  static func parseProxyAuth(_ node: ConfigNode, file: String) -> ProxyAuthConfig? {
    guard let mapping = node.mapping(allowed: ["htpasswd", "realm", "logUser"]),
      let path = mapping.required("htpasswd").flatMap({ configPath($0, file: file) })
    else { return nil }
    var auth = ProxyAuthConfig(htpasswd: path)
    if let realm = mapping["realm"], let text = realm.string {
      // It is sent inside a quoted-string (RFC 9110 §11.6.1).
      if (1...100).contains(text.utf8.count),
        text.utf8.allSatisfy({
          (0x20...0x7e).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\")
        })
      {
        auth.realm = text
      } else {
        realm.error("a realm is 1 to 100 printable ASCII characters without \" or \\")
      }
    }
    auth.logUser = mapping["logUser"]?.bool ?? false
    return auth
  }

  static func parseClientNames(_ node: ConfigNode) -> ClientNamesConfig? {
    guard let mapping = node.mapping(allowed: ["cn", "dns", "uri"]) else { return nil }
    var names = ClientNamesConfig()
    names.commonNames = mapping["cn"]?.strings ?? []
    names.dnsNames = mapping["dns"]?.strings ?? []
    names.uris = mapping["uri"]?.strings ?? []
    if names.isEmpty {
      node.error("name at least one of cn, dns, uri; without the key any certificate of the CA is allowed")
    }
    return names
  }

  static let adminKeys: Set = ["address", "allowedClients", "tokenFile", "metricsClients"]

  static func parseAdmin(_ node: ConfigNode, file: String) -> AdminConfig? {
    guard let mapping = node.mapping(allowed: adminKeys),
      let addressNode = mapping.required("address"), let address = parseAddress(addressNode)
    else { return nil }
    var admin = AdminConfig(address: address)
    if let node = mapping["allowedClients"] { admin.allowedClients = parseAddressRules(node) }
    if let node = mapping["tokenFile"] { admin.tokenFile = configPath(node, file: file) }
    if let node = mapping["metricsClients"] { admin.metricsClients = parseAddressRules(node) }
    if !address.isLoopback, admin.allowedClients == nil, admin.tokenFile == nil {
      addressNode.error(
        "the admin endpoint on \(address) would be open to every host that can reach it: off loopback it"
          + " must name allowedClients or tokenFile (or both); metricsClients may read /metrics and /healthz"
          + " without the token")
    }
    return admin
  }
}

/// What `check` and the daemon warn about: a listener opened to every
/// address on purpose. It loads (the operator said so), but never quietly.
public struct AccessNotice: Sendable, Equatable {
  public var location: Location?
  public var message: String

  public static func notices(for configuration: Configuration) -> [AccessNotice] {
    var notices: [AccessNotice] = []
    for listener in configuration.listeners where listener.allowedUsers != nil && !listener.address.isLoopback
    {
      notices.append(
        AccessNotice(
          location: listener.allowedUsersLocation,
          message: "listener \(listener.name) is not on loopback: allowedUsers restricts only clients on this"
            + " host; peers from other hosts have no local user and are governed by its other rules"))
    }
    for listener in configuration.listeners {
      guard let rules = listener.allowedClients, !rules.openFamilies.isEmpty else { continue }
      let guarded = listener.proxyAuth != nil || listener.downstreamClientCA != nil
      notices.append(
        AccessNotice(
          location: listener.allowedClientsLocation,
          message: "listener \(listener.name) allows every \(rules.openFamilies.joined(separator: " and "))"
            + " address" + (guarded ? " (it still authenticates them)" : ": it is an open proxy")))
    }
    if let admin = configuration.admin, let rules = admin.allowedClients, !rules.openFamilies.isEmpty,
      admin.tokenFile == nil
    {
      notices.append(
        AccessNotice(
          location: nil,
          message: "the admin endpoint allows every \(rules.openFamilies.joined(separator: " and ")) address"
            + " without a token"))
    }
    if !configuration.defaults.allowedNetworks.isEmpty {
      let networks = configuration.defaults.allowedNetworks.map(\.description).joined(separator: ", ")
      notices.append(
        AccessNotice(
          location: configuration.defaults.allowedNetworksLocation,
          message:
            "defaults.allowedNetworks opens \(networks) to every host no rule names: a client may reach"
            + " internal services there through defaults"))
    }
    if let admin = configuration.admin, let scrapers = admin.metricsClients, !scrapers.openFamilies.isEmpty {
      notices.append(
        AccessNotice(
          location: nil,
          message: "the admin endpoint lets every \(scrapers.openFamilies.joined(separator: " and ")) address"
            + " read /metrics (metricsClients), with every rule name and, with proxyAuth.logUser, user names")
      )
    }
    return notices
  }
}
