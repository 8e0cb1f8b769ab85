import CCrypt

/// One htpasswd hash, checked once when the file is loaded and verified
/// with libxcrypt's `crypt_rn`. Only the methods Apache's `htpasswd -B`
/// writes (bcrypt) and the strong ones libxcrypt verifies (sha512crypt
/// `$6$`, sha256crypt `$5$`, yescrypt `$y$`, gost-yescrypt `$gy$`, scrypt
/// `$7$`) are accepted: plain text, Apache MD5 (`$apr1$`), `{SHA}`, MD5-crypt
/// and DES crypt fall to a laptop's GPU in hours.
struct PasswordHash: Sendable, Equatable {
  let text: String

  enum Problem: Error, Equatable, CustomStringConvertible {
    case plainText
    case weak(String)
    case unsupported

    var description: String {
      switch self {
      case .plainText: "a plain-text password; store a hash made by htpasswd -B (bcrypt)"
      case .weak(let method):
        "\(method) hashes are too weak to accept; re-create the entry with htpasswd -B (bcrypt)"
      case .unsupported: "not a hash this system's crypt(3) verifies; use htpasswd -B (bcrypt)"
      }
    }
  }

  /// The cost of a bcrypt hash (`$2y$NN$…`); 0 for other methods.
  var bcryptCost: Int {
    let parts = text.split(separator: "$", omittingEmptySubsequences: true)
    guard text.hasPrefix("$2"), parts.count >= 2 else { return 0 }
    return Int(parts[1]) ?? 0
  }

  static let strongPrefixes = ["$2y$", "$2b$", "$2a$", "$6$", "$5$", "$y$", "$gy$", "$7$"]

  init(checking text: String) throws(Problem) {
    if text.hasPrefix("$apr1$") { throw .weak("Apache MD5 ($apr1$)") }
    if text.hasPrefix("{SHA}") { throw .weak("SHA-1 ({SHA})") }
    if text.hasPrefix("$1$") { throw .weak("MD5-crypt ($1$)") }
    guard text.hasPrefix("$") else {
      // Thirteen characters of [./0-9A-Za-z] is DES crypt; anything else is the password itself.
      let des = text.utf8.count == 13 && text.utf8.allSatisfy { Self.isCryptCharacter($0) }
      throw des ? .weak("DES crypt") : .plainText
    }
    guard Self.strongPrefixes.contains(where: text.hasPrefix) else { throw .unsupported }
    switch crypt_checksalt(text) {
    case CRYPT_SALT_OK: break
    case CRYPT_SALT_METHOD_LEGACY, CRYPT_SALT_TOO_CHEAP: throw .weak(String(text.prefix(4)))
    default: throw .unsupported
    }
    self.text = text
  }

  private static func isCryptCharacter(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "."), UInt8(ascii: "/"), UInt8(ascii: "0")...UInt8(ascii: "9"),
      UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"):
      true
    default: false
    }
  }

  /// Hashes `password` with this hash's method and salt and compares the
  /// result in constant time. Slow on purpose (bcrypt): never on a loop.
  func verify(_ password: [UInt8]) -> Bool {
    // A NUL would end the C string early: such a password is never the one stored.
    guard !password.contains(0) else { return false }
    let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
    defer {
      // The buffer held the password: wipe it before it goes back to malloc.
      UnsafeMutableRawPointer(data).initializeMemory(
        as: UInt8.self, repeating: 0, count: MemoryLayout<crypt_data>.size)
      data.deallocate()
    }
    UnsafeMutableRawPointer(data).initializeMemory(
      as: UInt8.self, repeating: 0, count: MemoryLayout<crypt_data>.size)
    let phrase = password + [0]
    let result = phrase.withUnsafeBufferPointer { phraseBytes in
      phraseBytes.withMemoryRebound(to: CChar.self) { phraseChars in
        crypt_rn(phraseChars.baseAddress, text, data, Int32(MemoryLayout<crypt_data>.size))
      }
    }
    guard let result else { return false }
    return PasswordHash.constantTimeEqual(Array(String(cString: result).utf8), Array(text.utf8))
  }

  /// Compares every byte whatever differs first: the time taken says
  /// nothing about how much of a guess was right.
  static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var difference: UInt8 = a.count == b.count ? 0 : 1
    for index in 0..<max(a.count, b.count) {
      let x = index < a.count ? a[index] : 0
      let y = index < b.count ? b[index] : 0
      difference |= x ^ y
    }
    return difference == 0
  }
}
