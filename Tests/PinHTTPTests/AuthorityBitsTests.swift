import XCTest

@testable import PinHTTP

/// The host bytes an authority may hold, as bits, must say what RFC 3986
/// §3.2.2's list (`isAuthorityHostCharacter`) says, for every byte.
final class AuthorityBitsTests: XCTestCase {
  func testTheBitsAgreeWithTheListForEveryByte() {
    for byte in 0...255 {
      XCTAssertEqual(isAuthorityHostByte(UInt8(byte)), isAuthorityHostCharacter(UInt8(byte)), "byte \(byte)")
    }
    XCTAssertTrue(isAuthorityHostByte(UInt8(ascii: "~")))
    XCTAssertTrue(isAuthorityHostByte(UInt8(ascii: "]")))
    XCTAssertFalse(isAuthorityHostByte(UInt8(ascii: "@")))
    XCTAssertFalse(isAuthorityHostByte(UInt8(ascii: "/")))
    XCTAssertFalse(isAuthorityHostByte(0x80))
  }

  func testAHostIsCheckedWhereverItsSliceStarts() {
    let line = Array("GET http://a.example:8080/x HTTP/1.1".utf8)
    let target = line[4..<27]
    XCTAssertEqual(
      RequestTarget.parse(target, method: "GET"),
      .absolute(scheme: "http", host: "a.example", port: 8080, path: "/x"))
    XCTAssertNil(RequestTarget.parse(Array("http://a b/".utf8)[...], method: "GET"))
    XCTAssertNil(RequestTarget.parse(Array("http://a\u{7f}b/".utf8)[...], method: "GET"))
  }
}
