import PinHTTP
import XCTest

/// The request rules added after the adversarial review: Host (RFC 9112
/// §3.2), authorities, fragments, HTTP/1.0 with Transfer-Encoding, and a
/// parser that reads at most one message ahead.
final class RequestStrictnessTests: XCTestCase {
  func outcome(_ text: String) -> SplitFeeding.Outcome { SplitFeeding.outcome(text) }

  func firstHead(_ text: String) throws -> HTTPRequestHead {
    var parser = HTTP1Parser(role: .request)
    guard case .request(let head)? = try parser.feed(Array(text.utf8)).first else {
      throw HTTPParseError(.badRequest, "no head")
    }
    return head
  }

  /// The head scan skips eight bytes at a time: a NUL, a bare CR or a bare
  /// LF is refused at every offset within a word, and a head that passes the
  /// byte limit is refused at every alignment of the limit.
  func testEveryOffsetOfAForbiddenByteAndOfTheLimitIsSeen() throws {
    for offset in 0..<24 {
      let filler = String(repeating: "a", count: offset)
      for forbidden in ["\u{0}", "\r", "\n"] {
        let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Value: \(filler)\(forbidden)bbbbbbbbbbbbbbbb\r\n\r\n"
        XCTAssertEqual(
          outcome(text), .failure(.badRequest), "byte \(forbidden.utf8.first!) after \(offset) bytes")
      }
      let clean = "GET / HTTP/1.1\r\nHost: a\r\nX-Value: \(filler)bbbbbbbbbbbbbbbb\r\n\r\n"
      XCTAssertEqual(try firstHead(clean).headers.first("X-Value"), filler + "bbbbbbbbbbbbbbbb")
    }
    for limit in 40..<56 {
      let head = Array(
        "GET / HTTP/1.1\r\nHost: a\r\nX-Value: \(String(repeating: "v", count: 40))\r\n\r\n".utf8)
      var parser = HTTP1Parser(role: .request, limits: HTTPLimits(maxHeaderBytes: limit))
      XCTAssertThrowsError(try parser.feed(head), "limit \(limit)") { error in
        XCTAssertEqual((error as? HTTPParseError)?.kind, .headersTooLarge, "limit \(limit)")
      }
      var roomy = HTTP1Parser(role: .request, limits: HTTPLimits(maxHeaderBytes: head.count))
      XCTAssertNoThrow(try roomy.feed(head), "a head of exactly the limit (\(head.count)) passes")
    }
  }

  func testHTTP11NeedsExactlyOneValidHost() {
    XCTAssertEqual(outcome("GET / HTTP/1.1\r\n\r\n"), .failure(.badRequest))
    XCTAssertEqual(outcome("GET http://a/ HTTP/1.1\r\n\r\n"), .failure(.badRequest))
    XCTAssertEqual(outcome("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"), .failure(.badRequest))
    XCTAssertEqual(outcome("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"), .failure(.badRequest))
    XCTAssertEqual(outcome("GET / HTTP/1.1\r\nHost: a b\r\n\r\n"), .failure(.badRequest))
    XCTAssertEqual(outcome("GET / HTTP/1.1\r\nHost: a:+80\r\n\r\n"), .failure(.badRequest))
    XCTAssertNotEqual(outcome("GET / HTTP/1.0\r\n\r\n"), .failure(.badRequest))
    XCTAssertNotEqual(outcome("CONNECT a:443 HTTP/1.1\r\n\r\n"), .failure(.badRequest))
  }

  func testAuthoritiesArePlainDigitsAndBracketedV6() {
    XCTAssertNil(RequestTarget.parse("example.com:+443", method: "CONNECT"))
    XCTAssertNil(RequestTarget.parse("::1:443", method: "CONNECT"))
    XCTAssertNil(RequestTarget.parse("example.com:0443x", method: "CONNECT"))
    XCTAssertNil(RequestTarget.parse("example.com:-1", method: "CONNECT"))
    XCTAssertNil(RequestTarget.parse("http://example.com:+80/", method: "GET"))
    XCTAssertEqual(RequestTarget.parse("[::1]:443", method: "CONNECT"), .authority(host: "[::1]", port: 443))
  }

  func testFragmentsAreNotForwarded() {
    XCTAssertEqual(RequestTarget.parse("/a?b#frag", method: "GET"), .origin("/a?b"))
    XCTAssertEqual(
      RequestTarget.parse("http://h/a#x", method: "GET"),
      .absolute(scheme: "http", host: "h", port: nil, path: "/a"))
  }

  func testHTTP10WithTransferEncodingClosesAfterwards() throws {
    let head = try firstHead(
      "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    XCTAssertEqual(head.framing, .chunked)
    XCTAssertFalse(head.keepAlive)
  }

  func testTheFramingDecisionIsOnTheHead() throws {
    XCTAssertEqual(
      try firstHead("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc").framing, .length(3))
    XCTAssertEqual(
      try firstHead("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n").framing, .chunked)
    XCTAssertEqual(try firstHead("GET / HTTP/1.1\r\nHost: a\r\n\r\n").framing, .none)
  }

  func testAPausingParserReadsOneRequestAtATime() throws {
    var parser = HTTP1Parser(role: .request, pausesBetweenMessages: true)
    let three = String(repeating: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", count: 3)
    let first = try parser.feed(Array(three.utf8))
    XCTAssertEqual(first.count, 2, "one head and its end")
    XCTAssertTrue(parser.isPaused)
    XCTAssertEqual(parser.bufferedByteCount, three.utf8.count * 2 / 3)
    XCTAssertEqual(try parser.feed(Array("GET".utf8)), [], "nothing is parsed while paused")
    XCTAssertEqual(try parser.resume().count, 2)
    XCTAssertEqual(try parser.resume().count, 2)
    XCTAssertEqual(try parser.finish(), [], "EOF after a partial head waits for resume")
    XCTAssertThrowsError(try parser.resume(), "the partial head is a truncation once resumed")
  }

  func testAPausingParserKeepsAFullPipelinedRequestAcrossEOF() throws {
    var parser = HTTP1Parser(role: .request, pausesBetweenMessages: true)
    let two = String(repeating: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", count: 2)
    XCTAssertEqual(try parser.feed(Array(two.utf8)).count, 2)
    XCTAssertEqual(try parser.finish(), [])
    XCTAssertEqual(try parser.resume().count, 2, "the second request is still served")
  }

  /// A head arriving a byte at a time is scanned once, not once per byte:
  /// the work per byte must not grow with the head's length.
  func testByteAtATimeHeadsAreNotRescanned() throws {
    func feedByteAtATime(_ size: Int) throws -> Int {
      var parser = HTTP1Parser(role: .request, limits: HTTPLimits(maxHeaderBytes: 1 << 20))
      let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Pad: \(String(repeating: "p", count: size))\r\n\r\n"
      var events = 0
      for byte in text.utf8 { events += try parser.feed([byte]).count }
      return events
    }
    // Correctness at both sizes; the scan cost is covered by the benchmark
    // (Benchmarks/) — here only that both complete with one head each.
    XCTAssertEqual(try feedByteAtATime(100), 2)
    XCTAssertEqual(try feedByteAtATime(60_000), 2)
  }
}
