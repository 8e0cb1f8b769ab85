import XCTest

@testable import PinHTTP

/// The start line's parts are found eight bytes a step: every shape must
/// read as a byte-at-a-time reading would, reason phrases with spaces
/// and lines that end mid-word included.
final class StartLineTests: XCTestCase {
  private func reference(_ bytes: [UInt8]) -> (
    end: Int, firstSpace: Int?, secondSpace: Int?, moreSpaces: Bool
  ) {
    let end = bytes.firstIndex(of: 0x0d) ?? bytes.count
    let spaces = bytes[..<end].indices.filter { bytes[$0] == 0x20 }
    return (end, spaces.first, spaces.dropFirst().first, spaces.count > 2)
  }

  func testEveryShapeReadsAsOneByteAtATime() {
    var generator = SystemRandomNumberGenerator()
    let pool: [UInt8] = [0x20, 0x0d, 0x0a, 0x41, 0x2f, 0x31, 0x00, 0xff, 0x09]
    for _ in 0..<20_000 {
      let bytes = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
        Bool.random(using: &generator) ? 0x61 : pool.randomElement(using: &generator)!
      }
      let found = HTTP1Grammar.startLine(bytes)
      let expected = reference(bytes)
      XCTAssertEqual(found.end, expected.end, "\(bytes)")
      XCTAssertEqual(found.firstSpace, expected.firstSpace, "\(bytes)")
      XCTAssertEqual(found.secondSpace, expected.secondSpace, "\(bytes)")
      XCTAssertEqual(found.moreSpaces, expected.moreSpaces, "\(bytes)")
    }
  }

  func testStatusLinesKeepTheirWholeReason() throws {
    let head = Array("HTTP/1.1 404 Not Found Here\r\nA: 1".utf8)
    let response = try HTTP1Grammar.responseHead(head, limits: HTTPLimits())
    XCTAssertEqual(response.status, 404)
    XCTAssertEqual(response.reason, "Not Found Here")
    XCTAssertEqual(response.headers.first("A"), "1")
  }

  func testRequestLinesNeedExactlyTwoSpacesAndATokenMethod() throws {
    let limits = HTTPLimits()
    for method in ["GET", "POST", "PROPFIND", "M-SEARCH", "CONNECT"] {
      let target = method == "CONNECT" ? "a:443" : "/x"
      let head = try HTTP1Grammar.requestHead(Array("\(method) \(target) HTTP/1.0".utf8), limits: limits)
      XCTAssertEqual(head.method, method)
      XCTAssertEqual(head.version, .http10)
    }
    for line in [
      "GET /x  HTTP/1.1", "GET /x HTTP/1.1 ", "GET/x HTTP/1.1", "G(T /x HTTP/1.1", " GET /x HTTP/1.1",
    ] {
      XCTAssertThrowsError(
        try HTTP1Grammar.requestHead(Array("\(line)\r\nHost: a".utf8), limits: limits), line)
    }
  }
}
