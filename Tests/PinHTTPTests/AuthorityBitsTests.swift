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

  /// The host is scanned eight bytes a step while they are letters,
  /// digits, `-` or `.`: the split and the checks must be what a plain
  /// byte-by-byte reading gives, for every byte value in every position and
  /// for random authorities of every shape (brackets, ports, stray bytes).
  func testAnAuthorityIsSplitAndCheckedAsAByteByByteReadingWould() {
    func model(_ bytes: [UInt8]) -> (host: Range<Int>, port: Int?)? {
      guard !bytes.isEmpty else { return nil }
      var hostEnd = bytes.count
      var portStart: Int?
      if bytes[0] == UInt8(ascii: "[") {
        guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
        hostEnd = close + 1
        if hostEnd < bytes.count {
          guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
          portStart = hostEnd + 1
        }
      } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
        (hostEnd, portStart) = (colon, colon + 1)
      }
      guard hostEnd > 0, bytes[..<hostEnd].allSatisfy(isAuthorityHostCharacter) else { return nil }
      guard let portStart else { return (0..<hostEnd, nil) }
      let digits = bytes[portStart...]
      guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
        let port = Int(String(decoding: digits, as: UTF8.self)), (1...65535).contains(port)
      else { return nil }
      return (0..<hostEnd, port)
    }
    func parts(_ bytes: [UInt8]) -> (host: Range<Int>, port: Int?)? {
      bytes.withUnsafeBufferPointer { RequestTarget.authorityParts($0) }
    }
    func same(_ bytes: [UInt8], _ message: @autoclosure () -> String) {
      let (found, expected) = (parts(bytes), model(bytes))
      XCTAssertEqual(found?.host, expected?.host, message())
      XCTAssertEqual(found?.port, expected?.port, message())
    }
    let host = Array("api-1.example.test".utf8)
    for position in host.indices {
      for value in 0...255 {
        var bytes = host
        bytes[position] = UInt8(value)
        same(bytes, "byte \(value) at \(position)")
        same(bytes + Array(":8443".utf8), "byte \(value) at \(position), with a port")
      }
    }
    var generator = SystemRandomNumberGenerator()
    let alphabet = Array("aZ09-._~:[]@%!/ 8".utf8) + [0x80, 0xff, 0x00, 0x7f, 0x2c, 0x3a]
    for _ in 0..<20_000 {
      let bytes = (0..<Int.random(in: 0...24, using: &generator)).map { _ in
        alphabet.randomElement(using: &generator)!
      }
      same(bytes, "\(bytes)")
    }
  }
}
