/// A SHA-256 digest held inline (four words, no heap storage), so comparing and
/// hashing fingerprints on the hot path allocates nothing.
///
/// Equality is constant-time: every word is compared whatever the earlier words
/// held, so the time a pin comparison takes says nothing about how much of a pin
/// matched (ghostunnel does the same for its pins).
public struct Digest256: Sendable, Hashable, CustomStringConvertible {
  @usableFromInline let w0: UInt64
  @usableFromInline let w1: UInt64
  @usableFromInline let w2: UInt64
  @usableFromInline let w3: UInt64

  /// Builds a digest from exactly 32 bytes; any other length is `nil`.
  public init?(bytes: some Collection<UInt8>) {
    guard bytes.count == 32 else { return nil }
    var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    for (index, byte) in bytes.enumerated() {
      let shifted = UInt64(byte) << UInt64((7 - index % 8) * 8)
      switch index / 8 {
      case 0: words.0 |= shifted
      case 1: words.1 |= shifted
      case 2: words.2 |= shifted
      default: words.3 |= shifted
      }
    }
    (w0, w1, w2, w3) = words
  }

  /// Parses standard base64 of exactly 32 bytes (the form used in `sha256/…` pins).
  public init?(base64: String) {
    guard let bytes = Base64.decode(base64) else { return nil }
    self.init(bytes: bytes)
  }

  public var bytes: [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(32)
    for word in [w0, w1, w2, w3] {
      for shift in stride(from: 56, through: 0, by: -8) {
        out.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
      }
    }
    return out
  }

  public var base64: String { Base64.encode(bytes) }

  /// Upper-case hex, colon-separated pairs, as `openssl x509 -fingerprint` prints them.
  public var hex: String {
    bytes.map { byte in
      let digits = Array("0123456789ABCDEF")
      return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0f)]])
    }.joined(separator: ":")
  }

  public var description: String { base64 }

  @inlinable
  public static func == (lhs: Digest256, rhs: Digest256) -> Bool {
    ((lhs.w0 ^ rhs.w0) | (lhs.w1 ^ rhs.w1) | (lhs.w2 ^ rhs.w2) | (lhs.w3 ^ rhs.w3)) == 0
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(w0)
    hasher.combine(w1)
  }
}
