import Foundation

/// `pinproxy import ats`: an Info.plist's `NSAppTransportSecurity` (or that
/// dictionary alone), XML or binary, as pinproxy rules. ATS's defaults (TLS
/// 1.2, forward secrecy, no plain HTTP, no CT) are pinproxy's rule defaults,
/// so only what the app sets is written.
public enum ATSImporter {
  public struct Options: Sendable {
    /// The CT log list to name when a domain requires transparency.
    public var transparencyLogList: String?
    public init(transparencyLogList: String? = nil) { self.transparencyLogList = transparencyLogList }
  }

  public static func translate(_ root: [String: Any], input: String, options: Options = Options())
    throws(ImportError)
    -> ImportedConfig
  {
    guard let ats = root["NSAppTransportSecurity"] as? [String: Any] ?? (looksLikeATS(root) ? root : nil)
    else {
      throw ImportError("\(input) has no NSAppTransportSecurity dictionary")
    }
    var config = ImportedConfig(format: "App Transport Security", input: input)
    global(ats, into: &config)
    if let exceptions = ats["NSExceptionDomains"] as? [String: Any] {
      for name in exceptions.keys.sorted() {
        exception(name, exceptions[name], into: &config)
      }
    }
    if let pinned = ats["NSPinnedDomains"] as? [String: Any] {
      for name in pinned.keys.sorted() { pinnedDomain(name, pinned[name], into: &config) }
    }
    var pinnedParents = Set<String>()
    for (name, value) in (ats["NSPinnedDomains"] as? [String: Any]) ?? [:] {
      if let host = ImportValues.host(name), let settings = value as? [String: Any],
        ImportValues.bool(settings["NSIncludesSubdomains"]) == true
      {
        pinnedParents.insert(host)
      }
    }
    inherit(into: &config, pinnedParents: pinnedParents)
    for key in ats.keys.sorted() where !globalKeys.contains(key) {
      config.dropped.append("NSAppTransportSecurity.\(key): not an ATS key pinproxy knows")
    }
    if config.rules.contains(where: { $0.value("requiresCertificateTransparency") != nil }) {
      if let list = options.transparencyLogList {
        config.transparencyLogList = ImportValues.absolute(list)
      } else {
        config.transparencyLogList = "ct-log-list.json"
        config.dropped.append(
          "NSRequiresCertificateTransparency needs a CT log list: rerun with --ct-log-list FILE"
            + " (a copy of Apple's https://valid.apple.com/ct/log_list/current_log_list.json, the list ATS"
            + " enforces) or edit certificateTransparency.logList")
      }
    }
    return config
  }

  static let identityKeys = ["pinnedCAPublicKeyHashes", "pinnedLeafPublicKeyHashes"]
  static let exceptionSettings = [
    "allowsInsecureHTTPLoads", "minimumTLSVersion", "requiresForwardSecrecy",
    "requiresCertificateTransparency",
  ]

  /// ATS reads its two dictionaries independently, pinproxy routes a host to
  /// one rule; so each rule takes what ATS would also apply to its host:
  /// the identities of a pinned parent one label up with
  /// NSIncludesSubdomains, and, for a rule only pinned, the exceptions of
  /// the nearest exception parent with NSIncludesSubdomains (any depth).
  private static func inherit(into config: inout ImportedConfig, pinnedParents: Set<String>) {
    let rules = config.rules
    func isPinned(_ rule: ImportedConfig.Rule) -> Bool {
      rule.sources.contains { $0.hasPrefix("NSPinnedDomains") }
    }
    func isException(_ rule: ImportedConfig.Rule) -> Bool {
      rule.sources.contains { $0.hasPrefix("NSExceptionDomains") }
    }
    for index in config.rules.indices {
      let domain = config.rules[index].domain
      if !isPinned(config.rules[index]), let dot = domain.firstIndex(of: ".") {
        let parent = String(domain[domain.index(after: dot)...])
        if pinnedParents.contains(parent), let pinned = rules.first(where: { $0.domain == parent }) {
          for key in identityKeys {
            if let value = pinned.value(key) {
              config.rules[index].set(
                key, value, from: "NSPinnedDomains[\"\(parent)\"] with NSIncludesSubdomains")
            }
          }
          if config.rules[index].value("includesSubdomains") != nil {
            config.approximated.append(
              "\(domain): pinned through NSPinnedDomains[\"\(parent)\"] (one label), and its rule includes"
                + " subdomains, so names below \(domain) are pinned too, which ATS does not do")
          }
        }
      }
      if !isException(config.rules[index]) {
        let parents = rules.filter {
          isException($0) && domain.hasSuffix("." + $0.domain) && $0.value("includesSubdomains") == "true"
        }
        if let parent = parents.max(by: { $0.domain.count < $1.domain.count }) {
          for key in exceptionSettings {
            if let value = parent.value(key) {
              config.rules[index].set(
                key, value, from: "NSExceptionDomains[\"\(parent.domain)\"] with NSIncludesSubdomains")
            }
          }
        }
      }
    }
  }

  static let globalKeys: Set = [
    "NSAllowsArbitraryLoads", "NSAllowsArbitraryLoadsInWebContent", "NSAllowsArbitraryLoadsForMedia",
    "NSAllowsLocalNetworking", "NSExceptionDomains", "NSPinnedDomains",
  ]

  static func looksLikeATS(_ root: [String: Any]) -> Bool { root.keys.contains(where: globalKeys.contains) }

  private static func global(_ ats: [String: Any], into config: inout ImportedConfig) {
    let narrower = [
      "NSAllowsArbitraryLoadsInWebContent", "NSAllowsArbitraryLoadsForMedia", "NSAllowsLocalNetworking",
    ]
    for key in narrower where ImportValues.bool(ats[key]) == true {
      let what: String
      switch key {
      case "NSAllowsArbitraryLoadsInWebContent": what = "loads from web views"
      case "NSAllowsArbitraryLoadsForMedia": what = "media loads (AV Foundation)"
      default: what = "plain HTTP to local network names and addresses"
      }
      config.dropped.append(
        "\(key): the app relaxes ATS for \(what) only; a proxy cannot tell those requests apart")
    }
    guard ImportValues.bool(ats["NSAllowsArbitraryLoads"]) == true else { return }
    // iOS 10 and later ignore NSAllowsArbitraryLoads when a narrower key is present.
    if narrower.contains(where: { ats[$0] != nil }) {
      config.ignored.append(
        "NSAllowsArbitraryLoads: ignored, as iOS 10 and later ignore it when NSAllowsArbitraryLoadsInWebContent,"
          + " NSAllowsArbitraryLoadsForMedia or NSAllowsLocalNetworking is present")
      return
    }
    let source = "NSAllowsArbitraryLoads"
    config.defaults.append(.init(key: "minimumTLSVersion", value: "\"1.0\"", source: source))
    config.defaults.append(.init(key: "requiresForwardSecrecy", value: "false", source: source))
    config.dropped.append(
      "NSAllowsArbitraryLoads: plain http:// to hosts without a rule is refused by pinproxy's defaults;"
        + " the TLS floor and forward secrecy are relaxed in defaults as the app had them")
  }

  private static func exception(_ name: String, _ value: Any?, into config: inout ImportedConfig) {
    let source = "NSExceptionDomains[\"\(name)\"]"
    guard let host = ImportValues.host(name), let settings = value as? [String: Any] else {
      config.dropped.append("\(source): not a host name with a dictionary of exceptions")
      return
    }
    var dropped: [String] = []
    config.withRule(host, source: source) { rule in
      for key in settings.keys.sorted() {
        let keySource = "\(key)"
        let raw = settings[key]
        switch key {
        case "NSIncludesSubdomains":
          guard let flag = bool(raw, key, source, &dropped) else { continue }
          if flag { rule.set("includesSubdomains", "true", from: keySource) }
        case "NSExceptionAllowsInsecureHTTPLoads", "NSThirdPartyExceptionAllowsInsecureHTTPLoads":
          guard let flag = bool(raw, key, source, &dropped) else { continue }
          if flag { rule.set("allowsInsecureHTTPLoads", "true", from: keySource) }
        case "NSExceptionRequiresForwardSecrecy", "NSThirdPartyExceptionRequiresForwardSecrecy":
          guard let flag = bool(raw, key, source, &dropped) else { continue }
          if !flag { rule.set("requiresForwardSecrecy", "false", from: keySource) }
        case "NSRequiresCertificateTransparency":
          guard let flag = bool(raw, key, source, &dropped) else { continue }
          if flag { rule.set("requiresCertificateTransparency", "true", from: keySource) }
        case "NSExceptionMinimumTLSVersion", "NSThirdPartyExceptionMinimumTLSVersion":
          let versions = ["TLSv1.0": "1.0", "TLSv1.1": "1.1", "TLSv1.2": "1.2", "TLSv1.3": "1.3"]
          guard let text = raw as? String, let version = versions[text] else {
            dropped.append("\(source).\(key): not one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3")
            continue
          }
          if version != "1.2" { rule.set("minimumTLSVersion", "\"\(version)\"", from: keySource) }
        default:
          dropped.append("\(source).\(key): not an exception key pinproxy knows")
        }
      }
    }
    config.dropped += dropped
  }

  private static func pinnedDomain(_ name: String, _ value: Any?, into config: inout ImportedConfig) {
    let source = "NSPinnedDomains[\"\(name)\"]"
    guard let host = ImportValues.host(name), let settings = value as? [String: Any] else {
      config.dropped.append("\(source): not a host name with a dictionary of identities")
      return
    }
    let existing = config.rules.first { $0.domain == host }
    let existed = existing != nil
    let subdomainsBefore = existing?.value("includesSubdomains") != nil
    let pinnedSubdomains = ImportValues.bool(settings["NSIncludesSubdomains"]) == true
    var dropped: [String] = []
    var approximated: [String] = []
    config.withRule(host, source: source) { rule in
      for key in settings.keys.sorted() {
        switch key {
        case "NSIncludesSubdomains":
          guard let flag = bool(settings[key], key, source, &dropped), flag else { continue }
          if rule.value("includesSubdomains") == nil {
            rule.set("includesSubdomains", "true", from: "NSPinnedDomains NSIncludesSubdomains")
          }
          approximated.append(
            "\(source).NSIncludesSubdomains: ATS pins one more label (a.\(host)); pinproxy's includesSubdomains"
              + " covers every depth, so deeper names (b.a.\(host)) are pinned too")
        case "NSPinnedCAIdentities", "NSPinnedLeafIdentities":
          let target = key == "NSPinnedCAIdentities" ? "pinnedCAPublicKeyHashes" : "pinnedLeafPublicKeyHashes"
          var pins: [String] = []
          for (index, entry) in ((settings[key] as? [Any]) ?? []).enumerated() {
            guard let identity = entry as? [String: Any],
              let text = identity["SPKI-SHA256-BASE64"] as? String,
              let pin = ImportValues.pin(text)
            else {
              dropped.append("\(source).\(key)[\(index)]: not a dictionary with a SPKI-SHA256-BASE64 digest")
              continue
            }
            pins.append(pin)
          }
          if pins.isEmpty {
            // ATS requires at least one identity; an empty list must not become "no pins".
            dropped.append("\(source).\(key): no usable identity, so nothing of it is enforced")
          } else {
            rule.set(target, YAMLWriter.list(pins), from: key)
          }
        default:
          dropped.append("\(source).\(key): not a pinned-domain key pinproxy knows")
        }
      }
    }
    config.dropped += dropped
    config.approximated += approximated
    // One rule per domain: when both dictionaries name it, a subdomain
    // setting in either reaches the settings of both.
    if existed, subdomainsBefore != pinnedSubdomains {
      config.approximated.append(
        "\(host): NSExceptionDomains and NSPinnedDomains disagree on NSIncludesSubdomains; the one rule"
          + " covers subdomains for the exceptions and the pins alike")
    }
  }

  private static func bool(_ raw: Any?, _ key: String, _ source: String, _ dropped: inout [String]) -> Bool? {
    guard let flag = ImportValues.bool(raw) else {
      dropped.append("\(source).\(key): not a boolean")
      return nil
    }
    return flag
  }
}

/// A file that could not be imported at all (exit 2).
public struct ImportError: Error, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}
