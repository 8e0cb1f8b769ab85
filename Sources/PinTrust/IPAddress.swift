/// An IPv4 (4 bytes) or IPv6 (16 bytes) address, parsed strictly in pure Swift.
///
/// Dotted quads with leading zeros are refused: some resolvers read them as
/// octal, and a host that two components read differently must not reach the
/// trust check at all.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
  public let bytes: [UInt8]

  public init?(bytes: [UInt8]) {
    guard bytes.count == 4 || bytes.count == 16 else { return nil }
    self.bytes = bytes
  }

  public init?(_ text: String) {
    if let v4 = IPAddress.parseIPv4(Substring(text)) {
      bytes = v4
    } else if let v6 = IPAddress.parseIPv6(text) {
      bytes = v6
    } else {
      return nil
    }
  }

  public var isIPv6: Bool { bytes.count == 16 }

  public var description: String {
    if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
    // RFC 5952 §5: an IPv4-mapped address keeps its IPv4 part dotted.
    if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
      return "::ffff:" + bytes[12...].map(String.init).joined(separator: ".")
    }
    var groups: [UInt16] = []
    for index in stride(from: 0, to: 16, by: 2) {
      groups.append(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]))
    }
    // RFC 5952 §4.2: compress the longest run (of two or more) of zero groups.
    var bestStart = -1
    var bestLength = 1
    var index = 0
    while index < 8 {
      if groups[index] == 0 {
        let start = index
        while index < 8 && groups[index] == 0 { index += 1 }
        if index - start > bestLength { (bestStart, bestLength) = (start, index - start) }
      } else {
        index += 1
      }
    }
    let hex = groups.map { String($0, radix: 16) }
    if bestStart < 0 { return hex.joined(separator: ":") }
    let head = hex[..<bestStart].joined(separator: ":")
    let tail = hex[(bestStart + bestLength)...].joined(separator: ":")
    return head + "::" + tail
  }

  static func parseIPv4(_ text: Substring) -> [UInt8]? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 4 else { return nil }
    var out: [UInt8] = []
    for part in parts {
      guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
      guard part.count == 1 || part.first != "0", let value = UInt8(part) else { return nil }
      out.append(value)
    }
    return out
  }

  static func parseIPv6(_ text: String) -> [UInt8]? {
    guard text.contains(":"), !text.contains(":::") else { return nil }
    let halves = text.components(separatedBy: "::")
    guard halves.count <= 2 else { return nil }
    func groups(_ part: String, allowIPv4Tail: Bool) -> [UInt8]? {
      if part.isEmpty { return [] }
      var out: [UInt8] = []
      let pieces = part.split(separator: ":", omittingEmptySubsequences: false)
      for (index, piece) in pieces.enumerated() {
        if allowIPv4Tail && index == pieces.count - 1 && piece.contains(".") {
          guard let v4 = parseIPv4(piece) else { return nil }
          out += v4
          continue
        }
        guard (1...4).contains(piece.count), piece.allSatisfy(\.isHexDigit),
          let value = UInt16(piece, radix: 16)
        else { return nil }
        out += [UInt8(value >> 8), UInt8(value & 0xff)]
      }
      return out
    }
    if halves.count == 1 {
      guard let all = groups(halves[0], allowIPv4Tail: true), all.count == 16 else { return nil }
      return all
    }
    guard let head = groups(halves[0], allowIPv4Tail: false),
      let tail = groups(halves[1], allowIPv4Tail: true),
      head.count + tail.count <= 14
    else { return nil }
    return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
  }
}
