import XCTest

@testable import PinHTTP

/// The field parser tests token characters with two words of bits; they
/// must say what RFC 9110 §5.6.2's list (`isTokenCharacter`) says, for
/// every byte. And a header-name set rejects by length first: it must still
/// find every name it holds, in any case.
final class TokenBitsTests: XCTestCase {
  func testTheBitsAgreeWithTheListForEveryByte() {
    for byte in 0...255 {
      XCTAssertEqual(
        HTTP1Grammar.isTokenByte(UInt8(byte)), HTTP1Grammar.isTokenCharacter(UInt8(byte)), "byte \(byte)")
    }
    XCTAssertTrue(HTTP1Grammar.isTokenByte(UInt8(ascii: "~")))
    XCTAssertFalse(HTTP1Grammar.isTokenByte(UInt8(ascii: ":")))
    XCTAssertFalse(HTTP1Grammar.isTokenByte(0x80))
  }

  /// A field name is skipped eight bytes a step while they are letters,
  /// digits or `-`: every byte value, in every position of a word, stops
  /// the step exactly where a byte-by-byte test would; so do random words.
  func testAWordOfANameIsSkippedExactlyAsFarAsItsPlainBytesGo() {
    func plain(_ byte: UInt8) -> Bool {
      (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39)
        || byte == 0x2d
    }
    func expected(_ bytes: [UInt8]) -> Int { bytes.firstIndex { !plain($0) } ?? 8 }
    func counted(_ bytes: [UInt8]) -> Int {
      bytes.withUnsafeBytes { HTTP1Grammar.plainNameBytes(ByteWord.load($0, 0)) }
    }
    for filler in Array("aZ9-".utf8) {
      for position in 0..<8 {
        for value in 0...255 {
          var bytes = [UInt8](repeating: filler, count: 8)
          bytes[position] = UInt8(value)
          XCTAssertEqual(counted(bytes), expected(bytes), "byte \(value) at \(position) among \(filler)")
        }
      }
    }
    var generator = SystemRandomNumberGenerator()
    let alphabet =
      Array("aA-z0:9_ \u{7f}".utf8) + [0x80, 0xc1, 0xed, 0x00, 0x0d, 0x5b, 0x60, 0x7b, 0x2f, 0x3a, 0x40]
    for _ in 0..<20_000 {
      let bytes = (0..<8).map { _ in alphabet.randomElement(using: &generator)! }
      XCTAssertEqual(counted(bytes), expected(bytes), "\(bytes)")
    }
  }

  /// A request target is checked eight bytes a step: every byte value in
  /// every position of a word, and every length of a tail, is judged as
  /// the byte test (0x21...0x7E) judges it.
  func testATargetIsVisibleASCIIExactlyWhenEveryByteIs() {
    for position in 0..<8 {
      for value in 0...255 {
        var word = [UInt8](repeating: UInt8(ascii: "a"), count: 8)
        word[position] = UInt8(value)
        let visible = value > 0x20 && value < 0x7f
        XCTAssertEqual(
          word.withUnsafeBytes { ByteWord.firstNotVisible(ByteWord.load($0, 0)) }, visible ? 8 : position,
          "byte \(value) at \(position)")
        for length in [position + 1, 8, 13] {
          var target = [UInt8](repeating: UInt8(ascii: "/"), count: max(length, 8))
          target[position] = UInt8(value)
          XCTAssertEqual(
            HTTP1Grammar.allVisible(target[...]), visible, "byte \(value) at \(position) of \(length)")
          // The same byte in a tail shorter than a word.
          let tail = Array(target.prefix(position + 1))
          XCTAssertEqual(HTTP1Grammar.allVisible(tail[...]), visible)
        }
      }
    }
  }

  func testANameSetFindsItsNamesOfEveryLengthAndNothingElse() {
    let long = String(repeating: "x", count: 70)
    let set = HeaderNameSet(["te", "connection", "content-length", long])
    for name in ["TE", "Connection", "CONTENT-LENGTH", long.uppercased()] {
      XCTAssertTrue(set.contains(name), name)
    }
    for name in ["t", "connectio", "content-lengths", "server", String(repeating: "x", count: 69), ""] {
      XCTAssertFalse(set.contains(name), name)
    }
    var grown = set
    let added = Array("X-Hop".utf8)
    added.withUnsafeBufferPointer { grown.insert($0) }
    XCTAssertTrue(grown.contains("x-hop"))
    XCTAssertFalse(set.contains("x-hop"))
  }
}
