/// `pinproxy export trustkit`: the pinned rules as a TrustKit configuration
/// (`TSKConfiguration` → `TSKPinnedDomains`), in Info.plist form. TrustKit
/// pins any key of the chain after the default evaluation, as publicKey
/// mode does; it refuses to start with fewer than two pins for a domain.
public enum TrustKitExporter {
  public static func export(_ rules: [ExportRule]) -> AppExport {
    var result = AppExport()
    var domains: [(String, PlistValue)] = []
    for rule in rules where rule.pins || rule.hasDynamicPins {
      result.noteCommon(rule, format: "TrustKit")
      let pins = rule.allKeyPins
      guard !pins.isEmpty else { continue }
      if pins.count < 2 { result.singlePin.append(rule.domain) }
      if !rule.leafPins.isEmpty || !rule.caPins.isEmpty {
        result.approximated.append(
          "\(rule.domain): pinnedLeafPublicKeyHashes/pinnedCAPublicKeyHashes: TrustKit accepts any of its"
            + " TSKPublicKeyHashes anywhere in the chain")
      }
      if !rule.customAnchors.isEmpty {
        result.dropped.append("\(rule.domain): anchors: TrustKit evaluates against the system's roots only")
      }
      var entry: [(String, PlistValue)] = []
      if rule.includesSubdomains { entry.append(("TSKIncludeSubdomains", .bool(true))) }
      entry.append(("TSKEnforcePinning", .bool(rule.enforces)))
      entry.append(("TSKPublicKeyHashes", .array(pins.map { .string($0.base64) })))
      if !rule.reportURIs.isEmpty {
        entry.append(("TSKReportUris", .array(rule.reportURIs.map { .string($0) })))
      }
      if let day = rule.expiryDay { entry.append(("TSKExpirationDate", .string(day))) }
      domains.append((rule.domain, .dictionary(entry)))
    }
    result.text = PlistWriter.document(
      .dictionary([("TSKConfiguration", .dictionary([("TSKPinnedDomains", .dictionary(domains))]))]))
    return result
  }
}
