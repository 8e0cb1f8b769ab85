import PinTrust

/// The credential of a `Proxy-Authorization: Basic …` field (RFC 7617):
/// base64 of `user:password`. The password is kept as bytes and never
/// turned into a String, logged or stored; the user name is reported only
/// once verified.
struct BasicCredentials: Sendable, Equatable {
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
    self.init(user: decoded[..<colon], password: Array(decoded[(colon + 1)...]))
  }

  /// A user name and password that arrived apart (RFC 1929, SOCKS5), held
  /// to a Basic credential's rules so that both ways in name the same
  /// users: no colon in the user name (RFC 7617 §2), no control
  /// characters, valid UTF-8. nil otherwise.
  init?(user name: some Collection<UInt8>, password: [UInt8]) {
    // A user name with control characters is no user of an htpasswd file.
    guard !name.isEmpty, name.allSatisfy({ $0 >= 0x20 && $0 != 0x7f && $0 != UInt8(ascii: ":") }),
      let user = String(validating: name, as: UTF8.self)
    else { return nil }
    self.user = user
    self.password = password
  }
}
