/// `pinproxy import trustkit`: a TrustKit configuration (`TSKConfiguration`
/// in an Info.plist, or the dictionary alone as plist or JSON) as pinproxy
/// rules. TrustKit pins any key of the chain as built after the default
/// trust evaluation: pinproxy's `publicKey` mode over the system anchors.
public enum TrustKitImporter {
  static let domainKeys: Set = [
    "kTSKPublicKeyHashes", "kTSKIncludeSubdomains", "kTSKExcludeSubdomainFromParent", "kTSKEnforcePinning",
    "kTSKReportUris", "kTSKExpirationDate", "kTSKDisableDefaultReportUri", "kTSKPublicKeyAlgorithms",
  ]

  public static func translate(_ root: [String: Any], input: String) throws(ImportError) -> ImportedConfig {
    let configuration = spelled((root["TSKConfiguration"] as? [String: Any]) ?? root)
    guard let domains = configuration["kTSKPinnedDomains"] as? [String: Any] else {
      throw ImportError("\(input) has no kTSKPinnedDomains dictionary (in TSKConfiguration or at the top)")
    }
    var config = ImportedConfig(format: "TrustKit", input: input)
    for key in configuration.keys.sorted() where key != "kTSKPinnedDomains" {
      switch key {
      case "kTSKSwizzleNetworkDelegates":
        config.ignored.append(
          "kTSKSwizzleNetworkDelegates: how TrustKit hooks into the app; nothing to do in a proxy")
      default:
        config.dropped.append("TSKConfiguration.\(key): not a TrustKit key pinproxy knows")
      }
    }
    for name in domains.keys.sorted() {
      let source = "kTSKPinnedDomains[\"\(name)\"]"
      guard let host = ImportValues.host(name), let settings = (domains[name] as? [String: Any]).map(spelled)
      else {
        config.dropped.append("\(source): not a host name with a dictionary of settings")
        continue
      }
      var notes = Notes()
      config.withRule(host, source: source) { rule in
        translate(settings, host: host, source: source, into: &rule, notes: &notes)
      }
      config.dropped += notes.dropped
      config.approximated += notes.approximated
      config.ignored += notes.ignored
    }
    return config
  }

  /// TrustKit's Info.plist keys are the constants' values (`TSKPinnedDomains`);
  /// its code names them `kTSKPinnedDomains`, which configurations written as
  /// JSON or by hand sometimes use. Both mean the same key.
  static func spelled(_ dictionary: [String: Any]) -> [String: Any] {
    var out: [String: Any] = [:]
    for (key, value) in dictionary {
      out[key.hasPrefix("TSK") && key != "TSKConfiguration" ? "k" + key : key] = value
    }
    return out
  }

  private static func translate(
    _ settings: [String: Any], host: String, source: String, into rule: inout ImportedConfig.Rule,
    notes: inout Notes
  ) {
    for key in settings.keys.sorted() where !domainKeys.contains(key) {
      notes.dropped.append("\(source).\(key): not a TrustKit domain key pinproxy knows")
    }
    // TrustKit: an excluded subdomain is not pinned at all, whatever else it says.
    if ImportValues.bool(settings["kTSKExcludeSubdomainFromParent"]) == true {
      notes.ignored.append(
        "\(source): kTSKExcludeSubdomainFromParent, so \(host) gets a rule without pins"
          + " (the default trust evaluation only), and its other keys are not used, as in TrustKit")
      rule.set("anchors", YAMLWriter.list(["system"]), from: "kTSKExcludeSubdomainFromParent: not pinned")
      return
    }
    if let flag = ImportValues.bool(settings["kTSKIncludeSubdomains"]), flag {
      rule.set("includesSubdomains", "true", from: "kTSKIncludeSubdomains")
    }
    var pins: [String] = []
    for (index, value) in ((settings["kTSKPublicKeyHashes"] as? [Any]) ?? []).enumerated() {
      guard let text = value as? String, let pin = ImportValues.pin(text) else {
        notes.dropped.append("\(source).kTSKPublicKeyHashes[\(index)]: not a base64 SHA-256 digest")
        continue
      }
      if !pins.contains(pin) { pins.append(pin) }
    }
    let enforce = ImportValues.bool(settings["kTSKEnforcePinning"]) ?? true
    if pins.isEmpty {
      notes.dropped.append("\(source): no usable kTSKPublicKeyHashes, so the rule pins nothing")
    } else {
      rule.set("pinningMode", "publicKey", from: "kTSKPublicKeyHashes")
      rule.set("pinnedPublicKeyHashes", YAMLWriter.list(pins), from: "kTSKPublicKeyHashes")
      if enforce && pins.count < 2 {
        notes.approximated.append(
          "\(source): TrustKit refuses to start with fewer than two kTSKPublicKeyHashes when enforcing"
            + " (a backup pin); pinproxy enforces the one given")
      }
    }
    if let text = settings["kTSKExpirationDate"] as? String {
      if let day = ImportValues.day(text) {
        rule.set("pinsExpire", YAMLWriter.quote(day), from: "kTSKExpirationDate (fails open after it)")
      } else {
        notes.dropped.append("\(source).kTSKExpirationDate: \"\(text)\" is not a yyyy-MM-dd date")
      }
    }
    var uris: [String] = []
    for (index, value) in ((settings["kTSKReportUris"] as? [Any]) ?? []).enumerated() {
      guard let text = value as? String, ImportValues.reportURI(text) else {
        notes.dropped.append("\(source).kTSKReportUris[\(index)]: not an http:// or https:// URL with a host")
        continue
      }
      uris.append(text)
    }
    if !enforce || !uris.isEmpty {
      let report = "{enforce: \(ImportValues.yes(enforce)), uris: \(YAMLWriter.list(uris))}"
      rule.set("report", report, from: enforce ? "kTSKReportUris" : "kTSKEnforcePinning: NO (report-only)")
    }
    if settings["kTSKDisableDefaultReportUri"] != nil {
      notes.ignored.append("\(source).kTSKDisableDefaultReportUri: pinproxy has no default report URI")
    }
    if settings["kTSKPublicKeyAlgorithms"] != nil {
      notes.ignored.append(
        "\(source).kTSKPublicKeyAlgorithms: TrustKit 1.6 and later hash the whole SPKI, as pinproxy does")
    }
  }
}

/// What a translation step could not carry over, kept apart from the
/// configuration being built so that both can be changed in one pass.
struct Notes {
  var dropped: [String] = []
  var approximated: [String] = []
  var ignored: [String] = []
}
