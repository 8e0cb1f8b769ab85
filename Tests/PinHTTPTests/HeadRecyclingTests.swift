import PinHTTP
import XCTest

/// A keep-alive connection's parser reuses the storage of a head its caller
/// is done with for the next head. A head still held elsewhere must keep
/// its bytes, and the next head must read as its own.
final class HeadRecyclingTests: XCTestCase {
  func testARecycledHeadStillHeldKeepsItsFieldsAndTheNextHeadIsItsOwn() throws {
    var parser = HTTP1Parser(role: .response, pausesBetweenMessages: true)
    let first = try parser.feed(
      Array("HTTP/1.1 200 OK\r\nServer: one\r\nX-First: a\r\nContent-Length: 0\r\n\r\n".utf8))
    guard case .response(let kept)? = first.first else { return XCTFail("\(first)") }
    parser.recycle(kept.headers)
    _ = try parser.resume()
    let second = try parser.feed(
      Array("HTTP/1.1 404 Not Found\r\nServer: two-longer\r\nContent-Length: 0\r\n\r\n".utf8))
    guard case .response(let next)? = second.first else { return XCTFail("\(second)") }
    XCTAssertEqual(kept.headers.first("Server"), "one")
    XCTAssertEqual(kept.headers.first("X-First"), "a")
    XCTAssertEqual(kept.headers.count, 3)
    XCTAssertEqual(next.status, 404)
    XCTAssertEqual(next.headers.first("Server"), "two-longer")
    XCTAssertNil(next.headers.first("X-First"))
    XCTAssertEqual(next.headers.count, 2)
  }

  /// Recycled and no longer held: the next head is parsed into the same
  /// storage, and reads correctly after many rounds of different sizes.
  func testHeadsReusingOneStorageReadCorrectlyRoundAfterRound() throws {
    var parser = HTTP1Parser(role: .request, pausesBetweenMessages: true)
    for round in 0..<50 {
      let padding = String(repeating: "p", count: (round * 37) % 300)
      let events = try parser.feed(
        Array("GET /\(round) HTTP/1.1\r\nHost: h\(round)\r\nX-Pad: \(padding)\r\n\r\n".utf8))
      guard case .request(let head)? = events.first else { return XCTFail("round \(round): \(events)") }
      XCTAssertEqual(head.headers.first("Host"), "h\(round)")
      XCTAssertEqual(head.headers.first("X-Pad"), padding)
      XCTAssertEqual(head.rawTarget, "/\(round)")
      parser.recycle(head.headers)
      _ = try parser.resume()
    }
  }
}
