import PinTrust

/// The trust sections: `anchorSets`, `defaults`, `domains`.
extension ConfigurationParser {
  static func parseAnchorSets(_ node: ConfigNode, file: String) -> [AnchorSetConfig] {
    var sets: [AnchorSetConfig] = []
    for (name, entry) in node.namedEntries ?? [] {
      if name == SecurityPolicy.systemAnchors {
        entry.error("\"system\" is built in (the OS trust store) and cannot be redefined")
        continue
      }
      guard let mapping = entry.mapping(allowed: ["files", "crls"]),
        let files = mapping.required("files")?.sequence
      else {
        continue
      }
      if files.isEmpty { entry.error("an anchor set needs at least one file") }
      var set = AnchorSetConfig(
        name: name, files: files.compactMap { configPath($0, file: file) }, location: location(entry))
      if let crls = mapping["crls"] {
        if crls.sequence == nil { crls.error("a list of CRL files (DER or PEM)") }
        set.crls = (crls.sequence ?? []).compactMap { configPath($0, file: file) }
      }
      sets.append(set)
    }
    return sets
  }

  static func parseDefaults(_ node: ConfigNode) -> DefaultsConfig {
    var defaults = DefaultsConfig()
    guard
      let mapping = node.mapping(allowed: [
        "action", "minimumTLSVersion", "requiresForwardSecrecy", "revocation", "parentProxy",
        "allowedNetworks",
      ])
    else {
      return defaults
    }
    if let revocation = mapping["revocation"] { defaults.revocation = parseRevocation(revocation) }
    if let node = mapping["allowedNetworks"] {
      defaults.allowedNetworksLocation = Location(line: node.line, column: node.column, key: node.path)
      for entry in node.sequence ?? [] {
        guard let text = entry.string else { continue }
        switch AddressBlock.parse(text) {
        case .success(let block): defaults.allowedNetworks.append(block)
        case .failure(let error): entry.error(error.description)
        }
      }
      if node.sequence == nil { node.error("a list of networks (CIDR), such as [\"10.20.0.0/16\"]") }
    }
    defaults.action = mapping.choice("action", default: .validate)
    defaults.minimumTLSVersion = mapping.choice("minimumTLSVersion", default: .tls12)
    defaults.requiresForwardSecrecy = mapping["requiresForwardSecrecy"]?.bool ?? true
    defaults.parentProxy = mapping["parentProxy"].flatMap(parentChoice) ?? .direct
    return defaults
  }

  static let domainKeys: Set = [
    "domain", "includesSubdomains", "anchors", "pinningMode", "pinnedCertificates", "pinnedPublicKeyHashes",
    "validatesDomainName", "allowInvalidCertificates", "minimumTLSVersion", "requiresForwardSecrecy",
    "allowsInsecureHTTPLoads", "clientIdentity", "dynamicPins", "report", "pinnedLeafPublicKeyHashes",
    "pinnedCAPublicKeyHashes", "pinsExpire", "requiresCertificateTransparency", "upstreamHTTP2", "revocation",
    "parentProxy",
  ]

  static func parseDomain(_ node: ConfigNode, file: String) -> DomainConfig? {
    guard let mapping = node.mapping(allowed: domainKeys), let domainNode = mapping.required("domain"),
      let text = domainNode.string
    else { return nil }
    guard let host = TrustHost(text) else {
      domainNode.error("\"\(text)\" is not a valid host name or IP address")
      return nil
    }
    var domain = DomainConfig(domain: host, location: location(domainNode))
    domain.includesSubdomains = mapping["includesSubdomains"]?.bool ?? false
    if let anchors = mapping["anchors"] {
      domain.anchors = anchors.strings ?? []
      domain.anchorsLocation = location(anchors)
      if domain.anchors.isEmpty { anchors.error("at least one anchor set is required (e.g. [system])") }
    }
    domain.pinningMode = mapping.choice("pinningMode", default: .none)
    domain.pinnedCertificates = (mapping["pinnedCertificates"]?.sequence ?? []).compactMap {
      configPath($0, file: file)
    }
    domain.pinnedPublicKeyHashes = spkiPins(mapping["pinnedPublicKeyHashes"])
    for key in ["pinnedPublicKeyHashes", "pinnedLeafPublicKeyHashes", "pinnedCAPublicKeyHashes"] {
      if let node = mapping[key] { domain.pinKeyLocations[key] = location(node) }
    }
    domain.pinnedLeafPublicKeyHashes = spkiPins(mapping["pinnedLeafPublicKeyHashes"])
    domain.pinnedCAPublicKeyHashes = spkiPins(mapping["pinnedCAPublicKeyHashes"])
    for key in ["pinnedLeafPublicKeyHashes", "pinnedCAPublicKeyHashes"] {
      if let node = mapping[key], node.sequence?.isEmpty == true {
        node.error("an empty list pins nothing; remove the key or list sha256/BASE64 hashes")
      }
    }
    if let expiry = mapping["pinsExpire"], let text = expiry.string {
      if let date = ConfigValues.date(text) {
        domain.pinsExpire = date
        domain.pinsExpireLocation = location(expiry)
      } else {
        expiry.error("\"\(text)\" is not a date (2027-06-01, meaning 00:00 UTC) or an ISO 8601 instant")
      }
    }
    if let ct = mapping["requiresCertificateTransparency"] {
      domain.requiresCertificateTransparency = ct.bool ?? false
      domain.requiresCertificateTransparencyLocation = location(ct)
    }
    domain.validatesDomainName = mapping["validatesDomainName"]?.bool ?? true
    domain.allowInvalidCertificates = mapping["allowInvalidCertificates"]?.bool ?? false
    domain.minimumTLSVersion = mapping.choice("minimumTLSVersion", default: .tls12)
    domain.requiresForwardSecrecy = mapping["requiresForwardSecrecy"]?.bool ?? true
    domain.allowsInsecureHTTPLoads = mapping["allowsInsecureHTTPLoads"]?.bool ?? false
    domain.upstreamHTTP2 = mapping["upstreamHTTP2"]?.bool ?? true
    domain.parentProxy = mapping["parentProxy"].flatMap(parentChoice)
    if let revocation = mapping["revocation"] { domain.revocation = parseRevocation(revocation) }
    if let identity = mapping["clientIdentity"]?.mapping(allowed: ["pkcs12", "passphraseFile"]),
      let pkcs12 = identity.required("pkcs12").flatMap({ configPath($0, file: file) }),
      let passphrase = identity.required("passphraseFile").flatMap({ configPath($0, file: file) })
    {
      domain.clientIdentity = ClientIdentityConfig(pkcs12: pkcs12, passphraseFile: passphrase)
    }
    if let dynamic = mapping["dynamicPins"] { domain.dynamicPins = parseDynamicPins(dynamic, file: file) }
    if let report = mapping["report"]?.mapping(allowed: ["enforce", "uris"]) {
      var config = ReportConfig(enforce: report["enforce"]?.bool ?? true)
      for uri in report["uris"]?.sequence ?? [] {
        if let text = uri.string { config.uris.append((text, location(uri))) }
      }
      domain.report = config
    }
    let modeIsNone = (mapping["pinningMode"].flatMap { $0.node.string } ?? "none") == "none"
    // A misspelt `pinningMode` is the cause, already reported at its line;
    // "pinningMode is none" would be its consequence, reported first.
    if modeIsNone && !mapping.misspelled.contains("pinningMode")
      && (!domain.pinnedCertificates.isEmpty || !domain.pinnedPublicKeyHashes.isEmpty)
    {
      // AF keeps such pins unused; a config that pins with the mode left at
      // none almost always meant to pin, so it is refused rather than ignored.
      node.error("pins are configured but pinningMode is none; set pinningMode to certificate or publicKey")
    }
    if domain.pinningMode == .certificate && !domain.pinnedPublicKeyHashes.isEmpty {
      mapping["pinnedPublicKeyHashes"]?.error("SPKI hashes apply to pinningMode publicKey, not certificate")
    }
    return domain
  }

  /// `revocation: {crl, ocsp, stapledOCSP}` (`RevocationSettings`).
  static func parseRevocation(_ node: ConfigNode) -> RevocationSettings {
    guard let mapping = node.mapping(allowed: ["crl", "ocsp", "stapledOCSP"]) else { return .default }
    return RevocationSettings(
      crl: mapping.choice("crl", default: .off), ocsp: mapping.choice("ocsp", default: .off),
      stapledOCSP: mapping.choice("stapledOCSP", default: .check))
  }

  /// A list of `sha256/BASE64` pins; each bad one is reported where it is written.
  static func spkiPins(_ node: ConfigNode?) -> [Digest256] {
    var pins: [Digest256] = []
    for pinNode in node?.sequence ?? [] {
      guard let pin = pinNode.string else { continue }
      do {
        pins.append(try SPKIPin.parse(pin))
      } catch {
        pinNode.error(error.description)
      }
    }
    return pins
  }

  static func parseTransparency(_ node: ConfigNode, file: String) -> TransparencyConfig? {
    guard let mapping = node.mapping(allowed: ["logList", "minimumSCTs"]),
      let logList = mapping.required("logList").flatMap({ configPath($0, file: file) })
    else { return nil }
    var config = TransparencyConfig(logList: logList, location: location(node))
    if let minimum = mapping["minimumSCTs"], let count = minimum.int {
      if (1...16).contains(count) {
        config.minimumSCTs = count
      } else {
        minimum.error("must be 1 to 16")
      }
    }
    return config
  }

  static func parseDynamicPins(_ node: ConfigNode, file: String) -> DynamicPinsConfig? {
    let keys: Set = [
      "url", "publicKey", "useChallenge", "expectedCommonNames", "updateInterval",
      "expirationUpdateThreshold",
      "fallback",
    ]
    guard let mapping = node.mapping(allowed: keys), let urlNode = mapping.required("url"),
      let url = urlNode.string, let keyNode = mapping.required("publicKey"), let publicKey = keyNode.string
    else { return nil }
    var config = DynamicPinsConfig(
      url: url, urlLocation: location(urlNode), publicKey: publicKey, publicKeyLocation: location(keyNode))
    config.useChallenge = mapping["useChallenge"]?.bool ?? false
    config.expectedCommonNames = mapping["expectedCommonNames"]?.strings ?? []
    for (key, apply) in [
      ("updateInterval", { (value: Double) in config.updateInterval = value }),
      ("expirationUpdateThreshold", { (value: Double) in config.expirationUpdateThreshold = value }),
    ] {
      guard let durationNode = mapping[key], let text = durationNode.string else { continue }
      // Pin-list schedules run in days; a year bounds them (and the arithmetic).
      guard let seconds = ConfigValues.duration(text, maximum: 365 * 86_400) else {
        durationNode.error("\"\(text)\" is not a duration up to 365d, such as 30s, 5m, 12h or 14d")
        continue
      }
      apply(seconds)
    }
    config.fallback = mapping["fallback"].flatMap { configPath($0, file: file) }
    return config
  }

  static func configPath(_ node: ConfigNode, file: String) -> ConfigPath? {
    guard let text = node.string else { return nil }
    return ConfigPath(path: ConfigValues.resolve(text, relativeTo: file), location: location(node))
  }

  static func location(_ node: ConfigNode) -> Location {
    Location(line: node.line, column: node.column, key: node.path)
  }
}
