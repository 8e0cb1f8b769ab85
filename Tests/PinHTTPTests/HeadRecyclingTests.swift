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

  /// The upstream side's list of lent events, emptied with the response
  /// head's storage handed back to the parser: round after round the heads
  /// and bodies read correctly, the list is empty after, and a head copied
  /// out before it was emptied keeps its own fields.
  func testAnEmptiedEventListHandsItsHeadBackAndAHeadKeptElsewhereKeepsItsFields() throws {
    var parser = HTTP1Parser(role: .response, pausesBetweenMessages: true)
    var events = BorrowedEvents()
    var kept: HTTPResponseHead?
    for round in 0..<40 {
      let padding = String(repeating: "q", count: (round * 29) % 200)
      let body = "body-\(round)"
      let response = Array(
        "HTTP/1.1 200 OK\r\nX-Round: \(round)\r\nX-Pad: \(padding)\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
          .utf8)
      if round > 0 { try parser.resume(into: &events) }
      try response.withUnsafeBytes { try parser.feed($0, into: &events) }
      var (heads, bodies) = (0, "")
      for event in events.list {
        switch event {
        case .response(let head):
          heads += 1
          XCTAssertEqual(head.headers.first("X-Round"), "\(round)")
          XCTAssertEqual(head.headers.first("X-Pad"), padding)
          if round == 3 { kept = head }
        case .body(let bytes): bodies += String(decoding: bytes, as: UTF8.self)
        default: break
        }
      }
      XCTAssertEqual(heads, 1, "round \(round)")
      XCTAssertEqual(bodies, body)
      events.removeAll(recyclingHeadsInto: &parser)
      XCTAssertTrue(events.isEmpty)
    }
    XCTAssertEqual(kept?.headers.first("X-Round"), "3", "a head held elsewhere keeps its bytes")
    XCTAssertEqual(kept?.headers.first("X-Pad"), String(repeating: "q", count: 87))
  }
}
