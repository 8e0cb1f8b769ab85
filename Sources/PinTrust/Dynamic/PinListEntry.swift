import Foundation

/// One entry of a dynamic pin list (WultraSSLPinning format): the SHA-256 of
/// a whole DER certificate, the subject common name it belongs to, and when
/// it stops counting. docs/TRUST.md, dynamic pinning.
public struct PinListEntry: Sendable, Hashable {
  /// The certificate's subject CN, compared as an exact string.
  public var name: String
  /// SHA-256 of the certificate's DER encoding.
  public var fingerprint: Digest256
  /// The entry is not used at or after this instant.
  public var expires: Date
  /// Position in the chain the entry pins (0 = leaf); challenge-mode lists may set it.
  public var depth: Int
  /// v1 lists: the DER ECDSA signature over `signedMessage`; nil in challenge mode.
  public var signature: [UInt8]?

  public init(name: String, fingerprint: Digest256, expires: Date, depth: Int = 0, signature: [UInt8]? = nil)
  {
    self.name = name
    self.fingerprint = fingerprint
    self.expires = expires
    self.depth = depth
    self.signature = signature
  }

  /// `expires` as the list writes it: whole seconds since the Unix epoch.
  public var expiresSeconds: Int64 { Int64(expires.timeIntervalSince1970.rounded(.down)) }

  /// What a v1 signature covers: UTF-8 of `name&fingerprint_base64&expires`,
  /// expires in decimal seconds (the order the Wultra libraries use).
  public var signedMessage: [UInt8] {
    Array("\(name)&\(fingerprint.base64)&\(expiresSeconds)".utf8)
  }

  public func isExpired(at time: Date) -> Bool { time >= expires }

  /// Equal for the update rules' "already present": same name, fingerprint and expiry.
  func sameEntry(as other: PinListEntry) -> Bool {
    name == other.name && fingerprint == other.fingerprint && expiresSeconds == other.expiresSeconds
  }
}
