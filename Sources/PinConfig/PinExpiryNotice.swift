import Foundation
import PinTrust

/// `pinsExpire` made loud. Expired pins fail open on purpose (TrustKit,
/// Android), so an operator must hear about it: at start and on every
/// reload (a warning per rule), from `check` 30 days ahead, in `/policies`
/// and as the `pinproxy_pins_expire_seconds` gauge.
public struct PinExpiryNotice: Sendable, Equatable {
  public enum State: String, Sendable {
    /// The rule's static pins are no longer enforced.
    case expired
    /// They expire within `PinExpiryNotice.warningWindow`.
    case soon
  }

  /// Warned about this long before the pins expire.
  public static let warningWindow: TimeInterval = 30 * 86_400

  public var rule: String
  public var expires: Date
  public var state: State
  public var location: Location?

  /// Seconds until the pins expire (negative once they did).
  public func secondsLeft(at now: Date) -> Double { expires.timeIntervalSince(now) }

  /// One sentence for a log line or `check`.
  public func message(at now: Date) -> String {
    let day = TrustFailure.day(expires)
    switch state {
    case .expired:
      return "the pins of rule \(rule) expired on \(day) (pinsExpire) and are NOT enforced:"
        + " connections are accepted on the chain alone until the pins are renewed"
    case .soon:
      let days = Int((secondsLeft(at: now) / 86_400).rounded(.up))
      return "the pins of rule \(rule) expire on \(day) (pinsExpire), in \(days) day\(days == 1 ? "" : "s");"
        + " after that they are not enforced"
    }
  }

  /// The rules whose pins expired or expire within the window.
  public static func notices(for configuration: Configuration, at now: Date) -> [PinExpiryNotice] {
    configuration.domains.compactMap { domain in
      guard let expires = domain.pinsExpire, domain.hasStaticPins else { return nil }
      let left = expires.timeIntervalSince(now)
      guard left <= warningWindow else { return nil }
      return PinExpiryNotice(
        rule: domain.domain.description, expires: expires, state: left <= 0 ? .expired : .soon,
        location: domain.pinsExpireLocation)
    }
  }
}

extension DomainConfig {
  /// A pin mode or ATS identities: what `pinsExpire` applies to.
  public var hasStaticPins: Bool {
    pinningMode != .none || !pinnedLeafPublicKeyHashes.isEmpty || !pinnedCAPublicKeyHashes.isEmpty
  }
}
