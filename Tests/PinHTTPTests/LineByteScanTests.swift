import XCTest

@testable import PinHTTP

/// The head scan's eight-bytes-a-step test: it must find an LF, a CR or a NUL
/// in any position of a word, and nothing else.
final class LineByteScanTests: XCTestCase {
  func testEveryByteValueInEveryPosition() {
    for position in 0..<8 {
      for value in 0...255 {
        var bytes = [UInt8](repeating: 0x61, count: 8)
        bytes[position] = UInt8(value)
        let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
        XCTAssertEqual(
          HTTP1Grammar.hasLineByte(word), [0x00, 0x0a, 0x0d].contains(value),
          "byte \(value) at \(position)")
      }
    }
  }

  func testWordsOfOtherBytesAreSkipped() {
    var generator = SystemRandomNumberGenerator()
    let allowed = (0...255).map(UInt8.init).filter { ![0x00, 0x0a, 0x0d].contains($0) }
    for _ in 0..<20_000 {
      let bytes = (0..<8).map { _ in allowed.randomElement(using: &generator)! }
      let word = bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
      XCTAssertFalse(HTTP1Grammar.hasLineByte(word), "\(bytes)")
    }
  }
}
