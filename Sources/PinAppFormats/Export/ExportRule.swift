import Foundation
import PinConfig
import PinTrust

/// One domain rule as the app formats see it: the compiled policy's pins
/// split by what they may match, and the rule's transport settings. Built
/// from a checked configuration, so every pin is already a SHA-256 digest
/// and every domain a host.
public struct ExportRule: Sendable {
  public var domain: String
  public var includesSubdomains: Bool
  public var pinningMode: PinningMode
  /// AF's publicKey mode: any certificate of the chain as built may carry one.
  public var anyCertificatePins: [Digest256]
  /// ATS's NSPinnedLeafIdentities: the leaf's own key.
  public var leafPins: [Digest256]
  /// ATS's NSPinnedCAIdentities: a certificate above the leaf.
  public var caPins: [Digest256]
  /// Certificate mode: whole certificates, which no app format pins.
  public var certificatePins: Int
  public var pinsExpire: Date?
  /// `report.enforce`: false is report-only.
  public var enforces: Bool
  public var reportURIs: [String]
  /// Anchor set names other than `system`, with the files each holds.
  public var customAnchors: [(name: String, files: [String])]
  public var trustsSystemAnchors: Bool
  public var minimumTLSVersion: TLSVersion
  public var requiresForwardSecrecy: Bool
  public var requiresCertificateTransparency: Bool
  public var allowsInsecureHTTPLoads: Bool
  public var hasDynamicPins: Bool
  public var validatesDomainName: Bool
  public var allowInvalidCertificates: Bool

  public init(_ rule: DomainConfig, policy: SecurityPolicy, anchorFiles: [String: [String]]) {
    domain = rule.domain.description
    includesSubdomains = rule.includesSubdomains
    pinningMode = policy.pinningMode
    anyCertificatePins = policy.pinningMode == .publicKey ? Self.unique(policy.expectedPublicKeyPins) : []
    leafPins = Self.unique(policy.pinnedLeafPublicKeyHashes)
    caPins = Self.unique(policy.pinnedCAPublicKeyHashes)
    certificatePins = policy.pinningMode == .certificate ? policy.pinnedCertificates.count : 0
    pinsExpire = policy.pinsExpire
    enforces = rule.report?.enforce ?? true
    reportURIs = rule.report?.uris.map(\.uri) ?? []
    trustsSystemAnchors = rule.anchors.contains(SecurityPolicy.systemAnchors)
    customAnchors = rule.anchors.filter { $0 != SecurityPolicy.systemAnchors }.map {
      ($0, anchorFiles[$0] ?? [])
    }
    minimumTLSVersion = rule.minimumTLSVersion
    requiresForwardSecrecy = rule.requiresForwardSecrecy
    requiresCertificateTransparency = rule.requiresCertificateTransparency
    allowsInsecureHTTPLoads = rule.allowsInsecureHTTPLoads
    hasDynamicPins = rule.dynamicPins != nil
    validatesDomainName = policy.validatesDomainName
    allowInvalidCertificates = policy.allowInvalidCertificates
  }

  /// Whether the rule pins statically (what an app format can carry).
  public var pins: Bool {
    !anyCertificatePins.isEmpty || !leafPins.isEmpty || !caPins.isEmpty || certificatePins > 0
  }

  /// Every SPKI pin of the rule, each once.
  public var allKeyPins: [Digest256] { Self.unique(anyCertificatePins + leafPins + caPins) }

  /// `yyyy-MM-dd` of `pinsExpire`, in UTC (the day TrustKit and Android read).
  public var expiryDay: String? {
    pinsExpire.map { date in
      var calendar = Calendar(identifier: .gregorian)
      calendar.timeZone = TimeZone(identifier: "UTC")!
      let parts = calendar.dateComponents([.year, .month, .day], from: date)
      return String(format: "%04d-%02d-%02d", parts.year ?? 0, parts.month ?? 0, parts.day ?? 0)
    }
  }

  static func unique(_ pins: [Digest256]) -> [Digest256] {
    var seen = Set<Digest256>()
    return pins.filter { seen.insert($0).inserted }
  }
}

/// What an exporter wrote and what it could not: the same vocabulary as
/// `import` (`dropped:` the app will decide differently, `approximated:` the
/// app's reach differs), plus the rules an app would lock users out with.
public struct AppExport: Sendable {
  public var text = ""
  public var dropped: [String] = []
  public var approximated: [String] = []
  /// Domains whose pins would lock users out at the first key rotation: one
  /// pin (or one identity in a list that must match), no backup.
  public var singlePin: [String] = []
  /// Anchor files an Android `@raw/NAME` names: the resource name and the
  /// PEM files that make it.
  public var rawFiles: [(name: String, files: [String])] = []

  public init() {}

  /// Notes shared by every format about settings no app format carries.
  mutating func noteCommon(_ rule: ExportRule, format: String) {
    if rule.certificatePins > 0 {
      dropped.append(
        "\(rule.domain): pinningMode certificate pins whole certificates; \(format) pins public keys only")
    }
    if rule.hasDynamicPins {
      dropped.append("\(rule.domain): dynamicPins: a signed pin list the proxy fetches; \(format) has none")
    }
    if rule.allowInvalidCertificates {
      dropped.append("\(rule.domain): allowInvalidCertificates: \(format) always evaluates the chain")
    }
    if !rule.validatesDomainName {
      dropped.append("\(rule.domain): validatesDomainName false: \(format) always checks the host")
    }
  }

  /// One pin where a list must match is no backup: the rotation of that key
  /// locks users out.
  mutating func noteSinglePin(_ rule: ExportRule, lists: [[Digest256]]) {
    if lists.contains(where: { $0.count == 1 }) { singlePin.append(rule.domain) }
  }
}
