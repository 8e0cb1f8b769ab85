import Foundation

/// `pinproxy import android`: `res/xml/network_security_config.xml` as
/// pinproxy rules. Each `<domain>` of a `<domain-config>` becomes a rule with
/// the settings it inherits (nested configs from their parent, the outermost
/// from `<base-config>`): cleartext, trust anchors, and the pin set, whose
/// pins match any certificate of the chain as built (`publicKey` mode) and
/// stop being enforced after `expiration`.
public enum AndroidImporter {
  public struct Options: Sendable {
    /// The app's `res/raw` directory, where `@raw/NAME` anchor files are.
    public var rawDirectory: String?
    public init(rawDirectory: String? = nil) { self.rawDirectory = rawDirectory }
  }

  /// What a domain-config hands down to the ones nested in it.
  struct Inherited {
    var cleartext: Bool?
    var anchors: [String]?
    var anchorsSource = ""
    var pins: [String] = []
    var expiration: String?
  }

  public static func translate(_ root: XMLNode, input: String, options: Options = Options())
    throws(ImportError)
    -> ImportedConfig
  {
    guard root.name == "network-security-config" else {
      throw ImportError("\(input): the root element is <\(root.name)>, not <network-security-config>")
    }
    var config = ImportedConfig(format: "Android network security config", input: input)
    var base = Inherited()
    for child in root.children {
      switch child.name {
      case "base-config": base = baseConfig(child, options: options, into: &config)
      case "domain-config", "debug-overrides": break
      default: config.dropped.append("<\(child.name)> (line \(child.line)): not an element Android knows")
      }
    }
    if root.child(named: "base-config")?.attributes["cleartextTrafficPermitted"] == nil {
      config.approximated.append(
        "base-config cleartextTrafficPermitted is not set: its default depends on targetSdkVersion (true below"
          + " 28, false from 28); pinproxy refuses plain HTTP to hosts without a rule, as API 28 and later do"
      )
    }
    for child in root.children(named: "domain-config") {
      domainConfig(child, inherited: base, options: options, into: &config)
    }
    if !root.children(named: "debug-overrides").isEmpty {
      config.ignored.append("<debug-overrides>: applies to debuggable builds only")
    }
    return config
  }

  private static func baseConfig(_ node: XMLNode, options: Options, into config: inout ImportedConfig)
    -> Inherited
  {
    var base = Inherited()
    if let text = node.attributes["cleartextTrafficPermitted"] {
      base.cleartext = text == "true"
      if text == "true" {
        config.dropped.append(
          "base-config cleartextTrafficPermitted=\"true\" (line \(node.line)): plain http:// to hosts without a"
            + " rule is refused by pinproxy's defaults (domain-configs inherit it and allow it)")
      }
    }
    if let anchors = node.child(named: "trust-anchors") {
      let names = trustAnchors(anchors, options: options, into: &config)
      base.anchors = names
      base.anchorsSource = "base-config trust-anchors"
      if names != ["system"] {
        config.dropped.append(
          "base-config trust-anchors (line \(anchors.line)): pinproxy's defaults trust the system store only;"
            + " the domain rules below inherit the app's anchors")
      }
    }
    return base
  }

  private static func domainConfig(
    _ node: XMLNode, inherited: Inherited, options: Options, into config: inout ImportedConfig
  ) {
    var settings = inherited
    let line = node.line
    if let text = node.attributes["cleartextTrafficPermitted"] { settings.cleartext = text == "true" }
    if let anchors = node.child(named: "trust-anchors") {
      settings.anchors = trustAnchors(anchors, options: options, into: &config)
      settings.anchorsSource = "trust-anchors (line \(anchors.line))"
    }
    if let pinSet = node.child(named: "pin-set") {
      settings.pins = []
      settings.expiration = nil
      for pin in pinSet.children(named: "pin") {
        let digest = pin.attributes["digest"] ?? ""
        guard digest == "SHA-256", let value = ImportValues.pin(pin.text) else {
          config.dropped.append(
            "pin (line \(pin.line)): only digest=\"SHA-256\" with a base64 SPKI digest is understood")
          continue
        }
        if !settings.pins.contains(value) { settings.pins.append(value) }
      }
      if let expiration = pinSet.attributes["expiration"] {
        if let day = ImportValues.day(expiration) {
          settings.expiration = day
        } else {
          config.dropped.append(
            "pin-set expiration=\"\(expiration)\" (line \(pinSet.line)): not a yyyy-MM-dd date")
        }
      }
    }
    for child in node.children
    where !["domain", "trust-anchors", "pin-set", "domain-config"].contains(child.name) {
      config.dropped.append("<\(child.name)> (line \(child.line)): not a domain-config element Android knows")
    }
    for domain in node.children(named: "domain") {
      let name = domain.text.trimmingCharacters(in: .whitespacesAndNewlines)
      let source = "domain-config (line \(line)) <domain>\(name)</domain>"
      guard let host = ImportValues.host(name) else {
        config.dropped.append("\(source): not a host name")
        continue
      }
      config.withRule(host, source: source) { rule in
        if domain.attributes["includeSubdomains"] == "true" {
          rule.set("includesSubdomains", "true", from: "includeSubdomains")
        }
        if settings.cleartext == true {
          rule.set("allowsInsecureHTTPLoads", "true", from: "cleartextTrafficPermitted")
        }
        if let anchors = settings.anchors, anchors != ["system"], !anchors.isEmpty {
          rule.set("anchors", YAMLWriter.list(anchors), from: settings.anchorsSource)
        }
        if !settings.pins.isEmpty {
          rule.set("pinningMode", "publicKey", from: "pin-set")
          rule.set(
            "pinnedPublicKeyHashes", YAMLWriter.list(settings.pins), from: "pin-set <pin digest=\"SHA-256\">")
          if let day = settings.expiration {
            rule.set("pinsExpire", YAMLWriter.quote(day), from: "pin-set expiration (fails open after it)")
          }
        }
      }
    }
    for nested in node.children(named: "domain-config") {
      domainConfig(nested, inherited: settings, options: options, into: &config)
    }
  }

  /// The anchor set names for a `<trust-anchors>`: `system`, and one set per
  /// `@raw/NAME` file; `user` has no equivalent in front of the device.
  private static func trustAnchors(_ node: XMLNode, options: Options, into config: inout ImportedConfig)
    -> [String]
  {
    var names: [String] = []
    for certificates in node.children(named: "certificates") {
      let source = certificates.attributes["src"] ?? ""
      if certificates.attributes["overridePins"] == "true" {
        config.dropped.append(
          "certificates src=\"\(source)\" overridePins=\"true\" (line \(certificates.line)): chains to these anchors"
            + " skip the pins on Android; pinproxy enforces the pins for every chain")
      }
      switch source {
      case "system":
        if !names.contains("system") { names.append("system") }
      case "user":
        config.dropped.append(
          "certificates src=\"user\" (line \(certificates.line)): the device's user-installed CAs cannot be known"
            + " to a proxy")
      default:
        guard source.hasPrefix("@raw/"), let name = anchorName(String(source.dropFirst(5))) else {
          config.dropped.append(
            "certificates src=\"\(source)\" (line \(certificates.line)): not system, user or @raw/NAME")
          continue
        }
        if !config.anchorSets.contains(where: { $0.name == name }) {
          config.anchorSets.append(anchorSet(name, options: options, into: &config))
        }
        if !names.contains(name) { names.append(name) }
      }
    }
    if names.isEmpty {
      // The app trusts nothing pinproxy can see (no anchors, or only the
      // user's): fail closed with an anchor set the operator must supply,
      // never a silent fall back to the system store.
      let name = "app-anchors"
      if !config.anchorSets.contains(where: { $0.name == name }) {
        config.anchorSets.append(
          .init(
            name: name, file: "app-anchors.pem",
            source: "trust-anchors with no usable anchor (supply this file)"))
      }
      config.dropped.append(
        "trust-anchors (line \(node.line)): no anchor pinproxy can use; the rules name anchor set \(name),"
          + " whose file you must supply")
      names.append(name)
    }
    return names
  }

  /// A resource name as an anchor set name (letters, digits, `_`, `.`, `-`).
  static func anchorName(_ text: String) -> String? {
    guard !text.isEmpty, text != "system",
      text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "_.-".contains($0)) })
    else { return nil }
    return text
  }

  private static func anchorSet(_ name: String, options: Options, into config: inout ImportedConfig)
    -> ImportedConfig.AnchorSet
  {
    let source = "certificates src=\"@raw/\(name)\""
    if let directory = options.rawDirectory {
      let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
      let stem = { (file: String) in file.split(separator: ".", maxSplits: 1).first.map(String.init) ?? file }
      if let file = files.sorted().first(where: { stem($0) == name }) {
        return .init(name: name, file: ImportValues.absolute(directory + "/" + file), source: source)
      }
    }
    config.dropped.append(
      "\(source): the certificate is a file inside the app; give its res/raw directory with --raw DIR, or edit"
        + " anchorSets.\(name) to point at it")
    return .init(name: name, file: "res/raw/\(name).pem", source: source + " (supply this file)")
  }
}
