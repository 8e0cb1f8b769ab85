/// Standard base64 (RFC 4648 §4) with padding, strict on input: pins are
/// configuration, and a typo must be an error rather than a different pin.
public enum Base64 {
  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

  private static let decodeTable: [UInt8] = {
    var table = [UInt8](repeating: 0xff, count: 256)
    for (index, char) in alphabet.enumerated() { table[Int(char)] = UInt8(index) }
    return table
  }()

  public static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var index = 0
    while index < bytes.count {
      let b0 = bytes[index]
      let b1 = index + 1 < bytes.count ? bytes[index + 1] : 0
      let b2 = index + 2 < bytes.count ? bytes[index + 2] : 0
      out.append(alphabet[Int(b0 >> 2)])
      out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
      out.append(index + 1 < bytes.count ? alphabet[Int((b1 & 0x0f) << 2 | b2 >> 6)] : UInt8(ascii: "="))
      out.append(index + 2 < bytes.count ? alphabet[Int(b2 & 0x3f)] : UInt8(ascii: "="))
      index += 3
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Returns nil for any character outside the alphabet, misplaced padding or a bad length.
  public static func decode(_ text: String) -> [UInt8]? {
    let chars = Array(text.utf8)
    guard chars.count % 4 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(chars.count / 4 * 3)
    var index = 0
    while index < chars.count {
      let quad = chars[index..<index + 4]
      let padding = quad.reversed().prefix { $0 == UInt8(ascii: "=") }.count
      let isLast = index + 4 == chars.count
      guard padding <= 2, padding == 0 || isLast else { return nil }
      var values: [UInt8] = []
      for char in quad.prefix(4 - padding) {
        let value = decodeTable[Int(char)]
        guard value != 0xff else { return nil }
        values.append(value)
      }
      while values.count < 4 { values.append(0) }
      out.append(values[0] << 2 | values[1] >> 4)
      if padding < 2 { out.append(values[1] << 4 | values[2] >> 2) }
      if padding < 1 { out.append(values[2] << 6 | values[3]) }
      index += 4
    }
    return out
  }
}
