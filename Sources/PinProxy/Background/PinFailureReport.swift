import Foundation
import PinTLS
import PinTrust

/// A pin-failure report in TrustKit's JSON format (docs/TRUST.md,
/// pin-failure reports), so an existing TrustKit report collector accepts
/// it. Fields pinproxy adds start with `pinproxy-`.
struct PinFailureReport: Sendable {
  /// TrustKit's `validation-result` values.
  enum ValidationResult: Int, Sendable {
    case success = 0
    case noMatchingPin = 1
    case invalidChain = 2
    case invalidParameters = 3
    case userDefinedAnchor = 4
    case couldNotHashSPKI = 5

    init(_ failure: TrustFailure) {
      self = failure.isPinFailure ? .noMatchingPin : .invalidChain
    }
  }

  let host: TrustHost
  let port: Int
  let rule: String
  let includesSubdomains: Bool
  let enforced: Bool
  /// As presented; PEM-encoded only when the report is actually sent.
  let presented: [X509Certificate]
  let chainFingerprints: [Digest256]
  let knownPins: [Digest256]
  let result: ValidationResult
  let failure: TrustFailure
  let time: Date

  init(
    failure: TrustFailure, presented: [X509Certificate], key: UpstreamKey, route: UpstreamRoute, at time: Date
  ) {
    host = key.host
    port = key.port
    rule = route.rule?.domain.description ?? route.ruleName
    includesSubdomains = route.rule?.includesSubdomains ?? false
    enforced = route.policy?.policy.enforcesPins ?? true
    self.presented = presented
    chainFingerprints = presented.map { SHA256.digest($0.der) }
    knownPins = route.policy?.policy.expectedPublicKeyPins ?? []
    result = ValidationResult(failure)
    self.failure = failure
    self.time = time
  }

  /// What makes two reports the same for the 24-hour de-duplication:
  /// TrustKit's (noted-hostname, hostname, port, chain, pins, result).
  var deduplicationKey: Digest256 {
    var text = "\(rule)\n\(host)\n\(port)\n\(result.rawValue)\n"
    for digest in chainFingerprints { text += digest.base64 + "," }
    text += "\n"
    for pin in knownPins { text += pin.base64 + "," }
    return SHA256.digest(Array(text.utf8))
  }

  func json(vendorID: String) -> [UInt8] {
    let object: [String: Any] = [
      "app-bundle-id": "pinproxy",
      "app-version": ProxyVersion.current,
      "app-platform": "Linux",
      "app-platform-version": ProcessInfo.processInfo.operatingSystemVersionString,
      "app-vendor-id": vendorID,
      "trustkit-version": "pinproxy-\(ProxyVersion.current)",
      "date-time": AccessLine.dateTime(time),
      "hostname": host.description,
      "port": port,
      "noted-hostname": rule,
      "include-subdomains": includesSubdomains,
      "enforce-pinning": enforced,
      "validated-certificate-chain": presented.map { String(decoding: $0.pem, as: UTF8.self) },
      "known-pins": knownPins.map { "pin-sha256=\"\($0.base64)\"" },
      "validation-result": result.rawValue,
      "known-pins-expiration-date": NSNull(),
      "pinproxy-failure-code": failure.code.rawValue,
      "pinproxy-failure-reason": failure.reason,
    ]
    let data =
      (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    return Array(data)
  }
}

/// The running pinproxy's version, for reports and `pinproxy version`.
public enum ProxyVersion {
  public static let current = "0.1.0"
}
