/// Eight bytes a step: where the first byte of a kind lies in a word read
/// from a buffer. Each test marks the high bit of the bytes it matches
/// (the zero-byte test `(v - 0x01…) & ~v & 0x80…` and its variants); the
/// lowest mark is exact, while higher ones may be set by a borrow out of a
/// true one — so only the first is ever read (`first`), as glibc's
/// `strlen` reads its word tests.
enum ByteWord {
  static let ones: UInt64 = 0x0101_0101_0101_0101
  static let highs: UInt64 = 0x8080_8080_8080_8080

  /// Bytes `offset..<offset + 8` of `buffer`, the first in the lowest bits.
  @inline(__always)
  static func load(_ buffer: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
    UInt64(littleEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
  }

  /// Marks the bytes that are zero.
  @inline(__always)
  static func zeros(_ word: UInt64) -> UInt64 { (word &- ones) & ~word & highs }

  /// Marks the bytes below `bound` (at most 0x80).
  @inline(__always)
  static func below(_ word: UInt64, _ bound: UInt8) -> UInt64 {
    (word &- ones &* UInt64(bound)) & ~word & highs
  }

  /// Marks the bytes equal to `byte`.
  @inline(__always)
  static func equal(_ word: UInt64, _ byte: UInt8) -> UInt64 { zeros(word ^ (ones &* UInt64(byte))) }

  /// Marks the bytes above `bound`, exactly, in a word whose bytes are all
  /// at most 0x7F (its high bits set aside): a byte plus at most 0x7F never
  /// carries into the next, so every mark is true, not only the first.
  @inline(__always)
  static func above(_ low: UInt64, _ bound: UInt8) -> UInt64 {
    (low &+ (ones &* UInt64(0x7f - bound))) & highs
  }

  /// Marks the ASCII letters and digits, exactly, of a word whose high
  /// bits are set aside (`low`); bit 0x20 folds A-Z onto a-z and moves no
  /// other byte into a-z.
  @inline(__always)
  static func alphanumerics(_ low: UInt64) -> UInt64 {
    let folded = low | (ones &* 0x20)
    let letters = above(folded, 0x60) & ~above(folded, 0x7a)
    return letters | (above(low, 0x2f) & ~above(low, 0x39))
  }

  /// Marks the bytes equal to `byte` (at most 0x7F), exactly, in a word
  /// whose high bits are set aside.
  @inline(__always)
  static func exactly(_ low: UInt64, _ byte: UInt8) -> UInt64 {
    ~above(low ^ (ones &* UInt64(byte)), 0) & highs
  }

  /// The offset of the first byte outside 0x21...0x7E (a control byte,
  /// space, DEL or a byte with the high bit): 8 when there is none.
  @inline(__always)
  static func firstNotVisible(_ word: UInt64) -> Int {
    let low = word & ~highs
    let visible = above(low, 0x20) & ~above(low, 0x7e) & ~(word & highs)
    return first(~visible & highs)
  }

  /// The offset of the first marked byte; 8 when none is.
  @inline(__always)
  static func first(_ marks: UInt64) -> Int { marks.trailingZeroBitCount &>> 3 }
}
