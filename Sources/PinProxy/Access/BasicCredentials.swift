import PinTrust

/// The credential of a `Proxy-Authorization: Basic …` field (RFC 7617):
/// base64 of `user:password`. The password is kept as bytes and never
/// turned into a String, logged or stored; the user name is reported only
/// once verified.
struct BasicCredentials: Sendable {
  let user: String
  let password: [UInt8]

  /// nil for anything but one well-formed Basic credential.
  init?(field: String?) {
    guard let field else { return nil }
    let parts = field.split(separator: " ", omittingEmptySubsequences: true)
    // The scheme is case-insensitive (RFC 9110 §11.1).
    guard parts.count == 2, parts[0].lowercased() == "basic", parts[1].utf8.count <= 4096,
      let decoded = Base64.decode(String(parts[1])),
      let colon = decoded.firstIndex(of: UInt8(ascii: ":")), colon > 0
    else { return nil }
    // A user name with control characters is no user of an htpasswd file.
    let name = decoded[..<colon]
    guard name.allSatisfy({ $0 >= 0x20 && $0 != 0x7f }), let user = String(validating: name, as: UTF8.self)
    else { return nil }
    self.user = user
    password = Array(decoded[(colon + 1)...])
  }
}
