import Foundation
import PinConfig
import PinTrust

/// The checks every importer applies to values from an app's file before
/// they reach the output: names must be hosts, pins 32-byte base64 digests,
/// dates real calendar days, booleans booleans.
enum ImportValues {
  /// The host in pinproxy's form, or nil when it is not a host name or IP.
  static func host(_ text: String) -> String? {
    TrustHost(text.lowercased()).map(\.description)
  }

  /// `sha256/BASE64`, or nil when `base64` is not a SHA-256 digest.
  static func pin(_ base64: String) -> String? {
    Digest256(base64: base64.trimmingCharacters(in: .whitespacesAndNewlines)).map { SPKIPin.format($0) }
  }

  /// A plist or JSON boolean; strings are not booleans.
  static func bool(_ value: Any?) -> Bool? { value as? Bool }

  static func string(_ value: Any?) -> String? { value as? String }

  static func day(_ text: String) -> String? {
    ConfigValues.date(text) == nil ? nil : text
  }

  static func yes(_ flag: Bool) -> String { flag ? "true" : "false" }

  /// An absolute path, so the output can be checked from anywhere.
  static func absolute(_ path: String) -> String {
    URL(fileURLWithPath: path).standardizedFileURL.path
  }

  /// What `report.uris` accepts: `check` applies the same rule.
  static func reportURI(_ text: String) -> Bool { ConfigValues.internalURL(text) != nil }
}
