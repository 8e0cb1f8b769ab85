/// `pinproxy export okhttp`: a Kotlin `CertificatePinner` for OkHttp, whose
/// pins match any certificate of the cleaned chain (publicKey mode) and
/// whose `**.` pattern covers a domain and every name below it.
public enum OkHttpExporter {
  public static func export(_ rules: [ExportRule], source: String) -> AppExport {
    var result = AppExport()
    var out = "// Certificate pins exported by `pinproxy export okhttp` from \(comment(source)).\n"
    out += "val certificatePinner = CertificatePinner.Builder()\n"
    for rule in rules where rule.pins || rule.hasDynamicPins {
      result.noteCommon(rule, format: "OkHttp")
      let pins = rule.allKeyPins
      guard !pins.isEmpty else { continue }
      result.noteSinglePin(rule, lists: [pins])
      let pattern = rule.includesSubdomains ? "**." + rule.domain : rule.domain
      for pin in pins { out += "    .add(\"\(pattern)\", \"sha256/\(pin.base64)\")\n" }
      if !rule.leafPins.isEmpty || !rule.caPins.isEmpty {
        result.approximated.append(
          "\(rule.domain): pinnedLeafPublicKeyHashes/pinnedCAPublicKeyHashes: OkHttp accepts a pin anywhere in"
            + " the chain")
      }
      if let day = rule.expiryDay {
        result.dropped.append("\(rule.domain): pinsExpire \(day): OkHttp pins never expire")
      }
      if !rule.customAnchors.isEmpty {
        result.dropped.append(
          "\(rule.domain): anchors: a CertificatePinner does not change the trusted roots")
      }
      if !rule.enforces || !rule.reportURIs.isEmpty {
        result.dropped.append("\(rule.domain): report: OkHttp always enforces and reports nothing")
      }
    }
    result.text = out + "    .build()\n"
    return result
  }

  /// A file name inside a Kotlin line comment: printable ASCII only.
  static func comment(_ text: String) -> String {
    String(
      String.UnicodeScalarView(text.unicodeScalars.map { $0.value >= 0x20 && $0.value < 0x7f ? $0 : "?" }))
  }
}
