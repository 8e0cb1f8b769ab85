import Foundation

/// How close a pinned rule is to breaking at the next certificate rotation,
/// judged from its configuration and, once one was accepted, from a chain
/// actually seen: which pin the chain met, when the certificate carrying it
/// expires, and whether a configured pin remains that the chain does not use
/// (a backup, which TrustKit requires for this reason: when the pinned key
/// is rotated or lost, only a pin on another key keeps the rule working).
///
/// A value, computed without I/O or a clock: `at` is the instant judged.
public struct PinHealth: Sendable, Equatable {
  /// A configured pin that a certificate of the chain met.
  public struct Match: Sendable, Equatable {
    /// `sha256/BASE64` (publicKey mode) or `sha256 BASE64` of the whole
    /// certificate (certificate mode).
    public let pin: String
    public let subject: String
    public let notAfter: Date
    /// 0 for the leaf.
    public let depth: Int
  }

  /// The rule's configured pins, as written in the pin mode's terms.
  public let configuredPins: [String]
  /// The first certificate of the chain (leaf first) that met a pin; nil
  /// before a chain was seen, or when none met one (report-only).
  public let matched: Match?
  /// Configured pins no certificate of the chain uses.
  public let backupPins: [String]
  /// The rule has a signed dynamic pin list, which can be rotated without a
  /// configuration change.
  public let hasDynamicList: Bool
  /// Seconds from `at` until the matched certificate expires.
  public let secondsToExpiry: Double?
  /// Whether a chain was judged at all (else only the configuration was).
  public let chainSeen: Bool

  /// Days within which an expiring pinned certificate without a backup pin
  /// is a warning: TrustKit's and the alert rules' horizon.
  public static let warningDays = 30.0

  /// Whether the rule has something to rotate to, as far as it can be known:
  /// a dynamic list, or a pin the matched certificate does not carry (before
  /// any chain met a pin: a second pin).
  public var hasBackup: Bool {
    if hasDynamicList { return true }
    return chainSeen && matched != nil ? !backupPins.isEmpty : configuredPins.count > 1
  }

  /// A chain met a pin and every configured pin is on that chain: several
  /// pins, but all of keys in service, none held back for the next one
  /// (a single pin is warned about as such).
  public var hasNoOfflineBackup: Bool {
    chainSeen && matched != nil && backupPins.isEmpty && !hasDynamicList && configuredPins.count > 1
  }

  /// Whole days until the matched certificate expires (negative: expired).
  public var daysToExpiry: Int? { secondsToExpiry.map { Int(($0 / 86_400).rounded(.down)) } }

  /// A rule pinning one key with no dynamic list: nothing to rotate to.
  public var isSinglePin: Bool { configuredPins.count == 1 && !hasDynamicList }

  /// What an operator should act on, each as one sentence; empty when healthy.
  public var warnings: [String] {
    var found: [String] = []
    if isSinglePin {
      found.append(
        "only one pin and no dynamic pin list: a key rotation will break this rule; add a backup pin")
    }
    if chainSeen && matched == nil && !configuredPins.isEmpty {
      found.append("the last chain accepted met none of the configured pins (report-only)")
    }
    guard let seconds = secondsToExpiry, let matched, seconds < PinHealth.warningDays * 86_400 else {
      if hasNoOfflineBackup {
        found.append(
          "every pin is on a certificate of the chain served now: no backup pin of a key not yet deployed,"
            + " so replacing those keys (a new intermediate, a renewal with a new key) locks clients out")
      }
      return found
    }
    let days = daysToExpiry ?? 0
    if !chainSeen {
      // Certificate mode from the configuration: the pinned certificate that
      // expires last; after it no chain can meet any pin.
      found.append(
        days < 0
          ? "every pinned certificate has expired (the last, \(matched.subject))"
          : "every pinned certificate expires within \(days) days (the last, \(matched.subject))")
    } else if !hasBackup {
      found.append(
        days < 0
          ? "the pinned certificate \(matched.subject) has expired and no backup pin is configured"
          : "the pinned certificate \(matched.subject) expires in \(days) days and no backup pin is configured"
      )
    }
    return found
  }

  /// The configuration's view: the pins and, in certificate mode, the
  /// pinned certificate that expires last (`depth` -1: not from a chain):
  /// after it no chain can meet any pin, so it has no backup.
  public static func configured(_ policy: SecurityPolicy, hasDynamicList: Bool, at time: Date) -> PinHealth {
    var last: Match?
    if policy.pinningMode == .certificate,
      let certificate = policy.pinnedCertificates.max(by: { $0.notAfter < $1.notAfter })
    {
      last = Match(
        pin: pin(of: certificate, mode: .certificate), subject: certificate.subject,
        notAfter: certificate.notAfter, depth: -1)
    }
    return PinHealth(
      configuredPins: pins(of: policy), matched: last, backupPins: [], hasDynamicList: hasDynamicList,
      secondsToExpiry: last.map { $0.notAfter.timeIntervalSince(time) }, chainSeen: false)
  }

  /// The view from an accepted chain (presented certificates, leaf first).
  public static func assess(
    _ policy: SecurityPolicy, chain: [Certificate], hasDynamicList: Bool, at time: Date
  ) -> PinHealth {
    let configured = pins(of: policy)
    let used = chain.map { pin(of: $0, mode: policy.pinningMode) }
    var matched: Match?
    for (depth, certificate) in chain.enumerated() where configured.contains(used[depth]) {
      matched = Match(
        pin: used[depth], subject: certificate.subject, notAfter: certificate.notAfter, depth: depth)
      break
    }
    return PinHealth(
      configuredPins: configured, matched: matched, backupPins: configured.filter { !used.contains($0) },
      hasDynamicList: hasDynamicList, secondsToExpiry: matched.map { $0.notAfter.timeIntervalSince(time) },
      chainSeen: true)
  }

  /// A certificate's pin in `mode`'s terms.
  public static func pin(of certificate: Certificate, mode: PinningMode) -> String {
    mode == .certificate ? "sha256 " + certificate.fingerprint.base64 : certificate.spkiPin
  }

  /// The pins a rule is configured with, in its mode's terms (none when it
  /// does not pin).
  public static func pins(of policy: SecurityPolicy) -> [String] {
    switch policy.pinningMode {
    case .none: return []
    case .certificate: return policy.pinnedCertificates.map { pin(of: $0, mode: .certificate) }
    case .publicKey:
      var seen = Set<String>()
      return policy.expectedPublicKeyPins.map { SPKIPin.prefix + $0.base64 }.filter {
        seen.insert($0).inserted
      }
    }
  }
}
