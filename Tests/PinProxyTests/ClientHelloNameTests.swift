import Foundation
import XCTest

@testable @_spi(Fuzzing) import PinProxy

/// The name a spliced tunnel's client asks for, read from its ClientHello:
/// real ClientHellos of `openssl s_client` (the fuzz corpus's seeds), cut
/// every way, and hostile variations of them.
final class ClientHelloNameTests: XCTestCase {
  /// A ClientHello `openssl s_client -servername Pinned.Example.` sent, and one of `-noservername`.
  func seed(_ name: String) throws -> [UInt8] {
    let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus/FuzzClientHello/\(name)")
    return Array(try Data(contentsOf: url).dropFirst(2))
  }

  func read(_ pieces: [[UInt8]]) -> ClientHelloName.Verdict {
    var reader = ClientHelloName()
    var verdict = ClientHelloName.Verdict.more
    for piece in pieces where verdict == .more { verdict = piece.withUnsafeBytes { reader.feed($0) } }
    return verdict
  }

  func testTheNameIsReadLowercasedWithoutItsDotHoweverTheBytesArrive() throws {
    let hello = try seed("seed-sni")
    XCTAssertEqual(read([hello]), .named("pinned.example"))
    XCTAssertEqual(read(hello.map { [$0] }), .named("pinned.example"), "byte by byte")
    XCTAssertEqual(read([Array(hello.prefix(40))]), .more, "an incomplete ClientHello waits")
    XCTAssertEqual(try read([seed("seed-nosni")]), .unnamed)
    // The same message split over two handshake records (RFC 8446 §5.1).
    let body = Array(hello.dropFirst(5))
    let split = 30
    let records =
      [22, 3, 1, 0, UInt8(split)] + body.prefix(split) + [22, 3, 1, UInt8((body.count - split) >> 8)]
      + [UInt8((body.count - split) & 0xff)] + body.dropFirst(split)
    XCTAssertEqual(read([records]), .named("pinned.example"))
  }

  func testWhatIsNotAClientHelloOrTooLargeIsMalformed() throws {
    XCTAssertEqual(read([Array("GET / HTTP/1.1\r\n".utf8)]), .malformed("the tunnel's first bytes are not a TLS handshake"))
    guard case .malformed = read([[22, 3, 1, 0x40, 0x01]]) else { return XCTFail("a record over 16 KiB") }
    // A ClientHello claiming more than the bound is refused once the bound is passed, not waited on.
    var huge: [UInt8] = []
    for _ in 0..<3 { huge += [22, 3, 1, 0x40, 0x00] + [UInt8](repeating: 1, count: 16_384) }
    guard case .malformed = read([huge]) else { return XCTFail("past the bound") }
    // A host name with a byte no host has.
    var hello = try seed("seed-sni")
    let at = try XCTUnwrap(findName(in: hello))
    hello[at] = UInt8(ascii: "/")
    guard case .malformed = read([hello]) else { return XCTFail("a bad host name") }
  }

  func findName(in bytes: [UInt8]) -> Int? {
    let name = Array("Pinned.Example".utf8)
    return (0...(bytes.count - name.count)).first { Array(bytes[$0..<($0 + name.count)]) == name }
  }

  func testTheFuzzPropertiesHoldOnTheSeedsAndTheirPrefixes() throws {
    for name in ["seed-sni", "seed-nosni"] {
      let hello = try seed(name)
      for cut in stride(from: 0, through: hello.count, by: 7) {
        XCTAssertNil(ClientHelloFuzzing.run([0, UInt8(cut % 251)] + hello.prefix(cut)), "\(name) cut at \(cut)")
      }
    }
  }
}
