/// The legacy spellings of an IPv4 address that resolvers still accept —
/// `2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1` — read as the C
/// library's `inet_aton` reads them: one to four parts, each decimal, octal
/// (leading `0`) or hexadecimal (`0x`), the last part filling the remaining
/// bytes. The WHATWG URL standard does the same for hosts whose last label is
/// a number.
///
/// Why: a policy decision about `0x7f000001` must be a decision about the
/// address the resolver will actually connect to (127.0.0.1), or a numeric
/// spelling would walk around every rule written for that address.
enum NumericHost {
  /// True when the last label is a number in one of those forms: such a host
  /// is an IPv4 address or invalid, never a DNS name.
  static func endsInNumber(_ text: Substring) -> Bool {
    // Per accepted host: the bytes of the last label, with no split and no
    // lowercased copy. A label with non-ASCII bytes takes the Character
    // path below, whose meaning (`isHexDigit`) this one must not change.
    var bytes = text.utf8[...]
    if bytes.last == UInt8(ascii: ".") { bytes.removeLast() }
    let last = bytes.lastIndex(of: UInt8(ascii: ".")).map { bytes[bytes.index(after: $0)...] } ?? bytes
    guard !last.isEmpty else { return false }
    guard last.allSatisfy({ $0 < 0x80 }) else { return endsInNumberSlowly(text) }
    if last.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return true }
    guard last.count >= 2, last.first == UInt8(ascii: "0"),
      last.dropFirst().first! | 0x20 == UInt8(ascii: "x")
    else { return false }
    return last.dropFirst(2).allSatisfy { byte in
      (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "f"))
    }
  }

  /// The label-splitting reading, kept for non-ASCII labels (and as the
  /// oracle of NumericHostTests).
  static func endsInNumberSlowly(_ text: Substring) -> Bool {
    var labels = text.split(separator: ".", omittingEmptySubsequences: false)
    if labels.count > 1, labels.last?.isEmpty == true { labels.removeLast() }
    guard let last = labels.last, !last.isEmpty else { return false }
    if last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return true }
    let lower = last.lowercased()
    return lower.hasPrefix("0x") && lower.dropFirst(2).allSatisfy(\.isHexDigit)
  }

  /// The four bytes, or nil when a part is malformed or out of range.
  static func ipv4(_ text: Substring) -> [UInt8]? {
    var parts = text.split(separator: ".", omittingEmptySubsequences: false)
    if parts.count > 1, parts.last?.isEmpty == true { parts.removeLast() }
    guard (1...4).contains(parts.count) else { return nil }
    var values: [UInt64] = []
    for part in parts {
      guard let value = number(part) else { return nil }
      values.append(value)
    }
    // Every part but the last is one byte; the last fills what remains.
    for value in values.dropLast() where value > 255 { return nil }
    let remaining = 4 - (values.count - 1)
    guard values[values.count - 1] < (UInt64(1) << (8 * remaining)) else { return nil }
    var bytes = values.dropLast().map { UInt8($0) }
    let last = values[values.count - 1]
    for index in (0..<remaining).reversed() { bytes.append(UInt8((last >> (8 * UInt64(index))) & 0xff)) }
    return bytes
  }

  private static func number(_ part: Substring) -> UInt64? {
    guard !part.isEmpty, part.utf8.count <= 34 else { return nil }
    let lower = part.lowercased()
    if lower.hasPrefix("0x") {
      let digits = lower.dropFirst(2)
      return digits.isEmpty ? 0 : UInt64(digits, radix: 16)
    }
    if lower.count > 1 && lower.hasPrefix("0") { return UInt64(lower.dropFirst(), radix: 8) }
    return UInt64(lower, radix: 10)
  }
}
