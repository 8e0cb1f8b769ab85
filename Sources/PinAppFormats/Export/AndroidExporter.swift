/// `pinproxy export android`: `res/xml/network_security_config.xml`, one
/// `<domain-config>` per rule that pins, trusts other anchors or allows
/// plain HTTP. Android pins match any certificate of the chain as built and
/// stop being enforced after `expiration`, as publicKey mode and
/// `pinsExpire` do; an anchor set becomes `@raw/NAME`.
public enum AndroidExporter {
  public static func export(_ rules: [ExportRule]) -> AppExport {
    var result = AppExport()
    // pinproxy refuses plain http:// to hosts without a rule: said for
    // every API level (the platform's default changed at API 28).
    var out = "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<network-security-config>\n"
    out += "  <base-config cleartextTrafficPermitted=\"false\"/>\n"
    for rule in rules {
      result.noteCommon(rule, format: "Android")
      let pins = rule.allKeyPins
      guard !pins.isEmpty || !rule.customAnchors.isEmpty || rule.allowsInsecureHTTPLoads else { continue }
      out +=
        rule.allowsInsecureHTTPLoads
        ? "  <domain-config cleartextTrafficPermitted=\"true\">\n" : "  <domain-config>\n"
      out +=
        "    <domain includeSubdomains=\"\(rule.includesSubdomains)\">\(PlistWriter.escaped(rule.domain))</domain>\n"
      if !rule.customAnchors.isEmpty {
        out += "    <trust-anchors>\n"
        if rule.trustsSystemAnchors { out += "      <certificates src=\"system\"/>\n" }
        for anchor in rule.customAnchors {
          let name = resourceName(anchor.name)
          out += "      <certificates src=\"@raw/\(name)\"/>\n"
          if !result.rawFiles.contains(where: { $0.name == name }) {
            result.rawFiles.append((name, anchor.files))
          }
        }
        out += "    </trust-anchors>\n"
      }
      if !pins.isEmpty {
        result.noteSinglePin(rule, lists: [pins])
        if !rule.leafPins.isEmpty || !rule.caPins.isEmpty {
          result.approximated.append(
            "\(rule.domain): pinnedLeafPublicKeyHashes/pinnedCAPublicKeyHashes: an Android pin-set matches any"
              + " certificate of the chain")
        }
        let expiration = rule.expiryDay.map { " expiration=\"\($0)\"" } ?? ""
        out += "    <pin-set\(expiration)>\n"
        for pin in pins { out += "      <pin digest=\"SHA-256\">\(pin.base64)</pin>\n" }
        out += "    </pin-set>\n"
      }
      out += "  </domain-config>\n"
      if rule.pins, !rule.enforces {
        result.dropped.append("\(rule.domain): report.enforce false: Android always enforces a pin-set")
      }
      if rule.pins, !rule.reportURIs.isEmpty {
        result.dropped.append("\(rule.domain): report.uris: Android sends no pin failure reports")
      }
    }
    for rule in rules where rule.minimumTLSVersion != .tls12 || !rule.requiresForwardSecrecy {
      result.dropped.append(
        "\(rule.domain): minimumTLSVersion/requiresForwardSecrecy: a network security config has no TLS settings"
      )
    }
    for rule in rules where rule.requiresCertificateTransparency {
      result.dropped.append(
        "\(rule.domain): requiresCertificateTransparency: not in this network security config")
    }
    result.text = out + "</network-security-config>\n"
    return result
  }

  /// An anchor set name as an Android resource name: lowercase letters,
  /// digits and `_`, starting with a letter.
  static func resourceName(_ name: String) -> String {
    var out = String(name.lowercased().map { $0.isASCII && ($0.isLetter || $0.isNumber) ? $0 : "_" })
    if out.first.map({ !$0.isLetter }) ?? true { out = "a_" + out }
    return out
  }
}
