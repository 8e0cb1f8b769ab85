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
