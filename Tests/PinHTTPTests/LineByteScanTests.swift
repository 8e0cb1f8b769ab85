import XCTest

@testable import PinHTTP

/// The head scans' eight-bytes-a-step tests: each must name the first byte
/// of its kind in a word — whatever the other bytes are, other matches after
/// it included (their borrows must not move the answer) — and 8 when the word
/// holds none.
final class LineByteScanTests: XCTestCase {
  private static let lineBytes: Set<UInt8> = [0x00, 0x0a, 0x0d]
  private static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7f }

  private func word(_ bytes: [UInt8]) -> UInt64 {
    bytes.withUnsafeBytes { ByteWord.load($0, 0) }
  }

  private func expected(_ bytes: [UInt8], _ matches: (UInt8) -> Bool) -> Int {
    bytes.firstIndex(where: matches) ?? 8
  }

  func testEveryByteValueInEveryPosition() {
    for position in 0..<8 {
      for value in 0...255 {
        var bytes = [UInt8](repeating: 0x61, count: 8)
        bytes[position] = UInt8(value)
        let isLine = Self.lineBytes.contains(UInt8(value))
        XCTAssertEqual(
          HTTP1Grammar.firstLineByte(word(bytes)), isLine ? position : 8, "byte \(value) at \(position)")
        XCTAssertEqual(
          HTTP1Grammar.firstControlByte(word(bytes)), Self.isControl(UInt8(value)) ? position : 8,
          "byte \(value) at \(position)")
      }
    }
  }

  /// Words mixing matching bytes with bytes next to them in value (0x01,
  /// 0x0b, 0x0e, 0x1f, 0x20, 0x7e, 0x80, 0xff): the borrow a match leaves
  /// is what could mislead a word test.
  func testMixedWordsNameTheFirstMatch() {
    var generator = SystemRandomNumberGenerator()
    let pool: [UInt8] = [
      0x00, 0x01, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x1f, 0x20, 0x21, 0x3a, 0x61, 0x7e, 0x7f, 0x80, 0x81,
      0x8a, 0x8d, 0xff,
    ]
    for _ in 0..<50_000 {
      let bytes = (0..<8).map { _ in pool.randomElement(using: &generator)! }
      XCTAssertEqual(
        HTTP1Grammar.firstLineByte(word(bytes)), expected(bytes) { Self.lineBytes.contains($0) }, "\(bytes)")
      XCTAssertEqual(HTTP1Grammar.firstControlByte(word(bytes)), expected(bytes, Self.isControl), "\(bytes)")
    }
  }

  func testWordsOfOtherBytesAreSkippedWhole() {
    var generator = SystemRandomNumberGenerator()
    let printable = (0...255).map(UInt8.init).filter { !Self.isControl($0) }
    for _ in 0..<20_000 {
      let bytes = (0..<8).map { _ in printable.randomElement(using: &generator)! }
      XCTAssertEqual(HTTP1Grammar.firstLineByte(word(bytes)), 8, "\(bytes)")
      XCTAssertEqual(HTTP1Grammar.firstControlByte(word(bytes)), 8, "\(bytes)")
    }
  }
}
