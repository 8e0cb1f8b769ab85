import PinTrust

/// `pinproxy export ats`: the rules as an Info.plist fragment,
/// `NSAppTransportSecurity` with `NSPinnedDomains` (SPKI identities) and
/// `NSExceptionDomains` (the transport settings that differ from ATS's
/// defaults). The inverse of `ATSImporter`.
public enum ATSExporter {
  public static func export(_ rules: [ExportRule]) -> AppExport {
    var result = AppExport()
    var pinned: [(String, PlistValue)] = []
    var exceptions: [(String, PlistValue)] = []
    for rule in rules {
      result.noteCommon(rule, format: "ATS")
      if let pins = identities(rule, into: &result) { pinned.append((rule.domain, pins)) }
      if let exception = exception(rule) { exceptions.append((rule.domain, exception)) }
      if !rule.customAnchors.isEmpty {
        result.dropped.append(
          "\(rule.domain): anchors \(rule.customAnchors.map(\.name).joined(separator: ", ")): ATS trusts the"
            + " system's roots only")
      }
      if rule.pins, rule.pinsExpire != nil {
        result.dropped.append(
          "\(rule.domain): pinsExpire: ATS pins never expire, the app would keep enforcing them after \(rule.expiryDay ?? "")"
        )
      }
      if rule.pins, !rule.enforces {
        result.dropped.append("\(rule.domain): report.enforce false: ATS always enforces its pins")
      }
      if rule.pins, !rule.reportURIs.isEmpty {
        result.dropped.append("\(rule.domain): report.uris: ATS sends no pin failure reports")
      }
    }
    var ats: [(String, PlistValue)] = []
    if !exceptions.isEmpty { ats.append(("NSExceptionDomains", .dictionary(exceptions))) }
    if !pinned.isEmpty { ats.append(("NSPinnedDomains", .dictionary(pinned))) }
    result.text = PlistWriter.document(.dictionary([("NSAppTransportSecurity", .dictionary(ats))]))
    return result
  }

  /// `NSPinnedDomains[domain]`, or nil when the rule pins no key.
  private static func identities(_ rule: ExportRule, into result: inout AppExport) -> PlistValue? {
    var ca = rule.caPins
    if !rule.anyCertificatePins.isEmpty {
      // AF's pins may match the leaf too; ATS splits leaf and CA identities
      // and, given both lists, needs a match in each, so the pins can only
      // go to the CA list: a pin of the leaf's own key would stop matching.
      ca = ExportRule.unique(ca + rule.anyCertificatePins)
      result.approximated.append(
        "\(rule.domain): pinningMode publicKey pins any certificate of the chain; ATS gets them as"
          + " NSPinnedCAIdentities, which the leaf's own key does not meet (move a leaf pin to"
          + " pinnedLeafPublicKeyHashes)")
    }
    guard !ca.isEmpty || !rule.leafPins.isEmpty else { return nil }
    result.noteSinglePin(rule, lists: [ca, rule.leafPins].filter { !$0.isEmpty })
    var entry: [(String, PlistValue)] = []
    if rule.includesSubdomains {
      entry.append(("NSIncludesSubdomains", .bool(true)))
      result.approximated.append(
        "\(rule.domain): includesSubdomains covers every depth; ATS's NSPinnedDomains NSIncludesSubdomains"
          + " pins one more label only (a.\(rule.domain), not b.a.\(rule.domain))")
    }
    func list(_ pins: [Digest256]) -> PlistValue {
      .array(pins.map { .dictionary([("SPKI-SHA256-BASE64", .string($0.base64))]) })
    }
    if !ca.isEmpty { entry.append(("NSPinnedCAIdentities", list(ca))) }
    if !rule.leafPins.isEmpty { entry.append(("NSPinnedLeafIdentities", list(rule.leafPins))) }
    return .dictionary(entry)
  }

  /// `NSExceptionDomains[domain]` for the settings that are not ATS's
  /// defaults (TLS 1.2, forward secrecy, no CT, no plain HTTP), else nil.
  private static func exception(_ rule: ExportRule) -> PlistValue? {
    var entry: [(String, PlistValue)] = []
    if rule.allowsInsecureHTTPLoads { entry.append(("NSExceptionAllowsInsecureHTTPLoads", .bool(true))) }
    if rule.minimumTLSVersion != .tls12 {
      entry.append(("NSExceptionMinimumTLSVersion", .string("TLSv" + rule.minimumTLSVersion.rawValue)))
    }
    if !rule.requiresForwardSecrecy { entry.append(("NSExceptionRequiresForwardSecrecy", .bool(false))) }
    if rule.requiresCertificateTransparency {
      entry.append(("NSRequiresCertificateTransparency", .bool(true)))
    }
    guard !entry.isEmpty else { return nil }
    if rule.includesSubdomains { entry.insert(("NSIncludesSubdomains", .bool(true)), at: 0) }
    return .dictionary(entry)
  }
}
