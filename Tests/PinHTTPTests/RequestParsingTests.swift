import PinHTTP
import XCTest

final class RequestParsingTests: XCTestCase {
  func events(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [HTTP1Parser.Event] {
    guard case .events(let events) = SplitFeeding.outcome(text, file: file, line: line) else {
      XCTFail("expected a valid message", file: file, line: line)
      return []
    }
    return events
  }

  func refused(
    _ text: String, _ kind: HTTPParseError.Kind = .badRequest, limits: HTTPLimits = HTTPLimits(),
    file: StaticString = #filePath, line: UInt = #line
  ) {
    XCTAssertEqual(
      SplitFeeding.outcome(text, limits: limits, file: file, line: line), .failure(kind), file: file,
      line: line)
  }

  func head(_ events: [HTTP1Parser.Event], _ index: Int = 0) -> HTTPRequestHead? {
    if case .request(let head) = events[index] { return head }
    return nil
  }

  func testOriginFormGetWithoutBody() {
    let parsed = events("GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n")
    XCTAssertEqual(parsed.count, 2)
    XCTAssertEqual(head(parsed)?.target, .origin("/index.html?q=1"))
    XCTAssertEqual(head(parsed)?.headers.first("host"), "example.com")
    XCTAssertEqual(parsed[1], .end(trailers: HTTPHeaders()))
  }

  func testAbsoluteFormTargets() {
    XCTAssertEqual(
      RequestTarget.parse("http://Example.com:8080/a/b?c", method: "GET"),
      .absolute(scheme: "http", host: "Example.com", port: 8080, path: "/a/b?c"))
    XCTAssertEqual(
      RequestTarget.parse("HTTPS://example.com", method: "GET"),
      .absolute(scheme: "https", host: "example.com", port: nil, path: "/"))
    XCTAssertEqual(
      RequestTarget.parse("http://[::1]:99?x", method: "GET"),
      .absolute(scheme: "http", host: "[::1]", port: 99, path: "/?x"))
    XCTAssertNil(RequestTarget.parse("http://user:pw@example.com/", method: "GET"))
    XCTAssertNil(RequestTarget.parse("ftp://example.com/", method: "GET"))
    XCTAssertNil(RequestTarget.parse("http://example.com:0/", method: "GET"))
    XCTAssertNil(RequestTarget.parse("http://example.com:99999/", method: "GET"))
    XCTAssertEqual(
      RequestTarget.parse("example.com:443", method: "CONNECT"), .authority(host: "example.com", port: 443))
    XCTAssertNil(RequestTarget.parse("example.com", method: "CONNECT"))
    XCTAssertEqual(RequestTarget.parse("*", method: "OPTIONS"), .asterisk)
    XCTAssertNil(RequestTarget.parse("*", method: "GET"))
  }

  func testContentLengthBodyStreamsAndEnds() {
    let parsed = events("POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world")
    XCTAssertEqual(
      Array(parsed.dropFirst()), [.body(Array("hello world".utf8)), .end(trailers: HTTPHeaders())])
  }

  func testChunkedBodyWithExtensionsAndTrailers() {
    let parsed = events(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n5;name=value\r\nhello\r\n6 ; x\r\n world\r\n0\r\nChecksum: abc\r\n\r\n"
    )
    XCTAssertEqual(parsed.count, 3)
    XCTAssertEqual(parsed[1], .body(Array("hello world".utf8)))
    XCTAssertEqual(parsed[2], .end(trailers: HTTPHeaders([("Checksum", "abc")])))
  }

  func testPipelinedRequestsAndLeadingEmptyLine() {
    let parsed = events(
      "\r\nGET /a HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nokGET /c HTTP/1.0\r\n\r\n"
    )
    let targets = parsed.compactMap { event -> RequestTarget? in
      if case .request(let head) = event { return head.target }
      return nil
    }
    XCTAssertEqual(targets, [.origin("/a"), .origin("/b"), .origin("/c")])
    XCTAssertEqual(parsed.filter { if case .end = $0 { return true } else { return false } }.count, 3)
  }

  func testIdenticalDuplicateContentLengthsAreOneLength() {
    let parsed = events("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nok")
    XCTAssertEqual(parsed[1], .body(Array("ok".utf8)))
  }

  func testConnectStopsParsingAndKeepsWhatFollows() throws {
    var parser = HTTP1Parser(role: .request)
    let events = try parser.feed(
      Array("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n\u{16}\u{03}\u{01}".utf8))
    XCTAssertEqual(events.count, 1)
    XCTAssertTrue(parser.isUpgraded)
    _ = try parser.feed([0x02])
    XCTAssertEqual(parser.takeLeftover(), [0x16, 0x03, 0x01, 0x02])
  }

  func testKeepAliveRules() {
    XCTAssertEqual(head(events("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))?.keepAlive, true)
    XCTAssertEqual(head(events("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))?.keepAlive, false)
    XCTAssertEqual(head(events("GET / HTTP/1.0\r\n\r\n"))?.keepAlive, false)
    XCTAssertEqual(head(events("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"))?.keepAlive, true)
  }

  // MARK: Smuggling shapes and malformed input

  func testContentLengthWithTransferEncodingIsRefused() {
    refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
  }

  func testDifferingContentLengthsAreRefused() {
    refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde")
    refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4, 5\r\n\r\nabcde")
  }

  func testInvalidContentLengthsAreRefused() {
    for value in ["-1", "+4", "0x10", "4 4", "", "1e3", "99999999999999999999"] {
      refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \(value)\r\n\r\n")
    }
  }

  func testTransferEncodingOtherThanASingleChunkedIsRefused() {
    for value in ["gzip", "gzip, chunked", "chunked, chunked", "chunked, gzip", "identity", "xchunked"] {
      refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \(value)\r\n\r\n0\r\n\r\n")
    }
    refused(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
  }

  func testBadChunkSizesAreRefused() {
    for size in ["g", "-1", "0x5", " 5", "5 x", "1234567890abcdef0", ""] {
      refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nhello\r\n0\r\n\r\n")
    }
    refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhello\r\n0\r\n\r\n")
  }

  func testObsFoldIsRefused() {
    refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n two\r\n\r\n")
    refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: one\r\n\ttwo\r\n\r\n")
  }

  func testBareCRLFAndNULAreRefused() {
    refused("GET / HTTP/1.1\nHost: a\n\n")
    refused("GET / HTTP/1.1\r\nHost: a\n\r\n")
    refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb\r\n\r\n")
    refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\u{0}b\r\n\r\n")
    refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n")
  }

  func testWhitespaceBeforeColonAndBadNamesAreRefused() {
    refused("GET / HTTP/1.1\r\nHost : a\r\n\r\n")
    refused("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n")
    refused("GET / HTTP/1.1\r\nHost: a\r\n: a\r\n\r\n")
    refused("GET / HTTP/1.1\r\nHost: a\r\nX(A): a\r\n\r\n")
  }

  func testMalformedRequestLinesAreRefused() {
    refused("GET  / HTTP/1.1\r\nHost: a\r\n\r\n")
    refused("GET / HTTP/1.1 extra\r\n\r\n")
    refused("G@T / HTTP/1.1\r\nHost: a\r\n\r\n")
    refused("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n")
    refused("GET http://user@example.com/ HTTP/1.1\r\nHost: a\r\n\r\n")
    refused("GET / HTTP/2.0\r\n\r\n", .versionNotSupported)
    refused("GET / HTTPS/1.1\r\n\r\n")
  }

  func testLimitsAnswer431And414() {
    let limits = HTTPLimits(maxHeaderBytes: 256, maxHeaderCount: 3, maxURILength: 32)
    refused(
      "GET / HTTP/1.1\r\nHost: a\r\nX-Big: \(String(repeating: "a", count: 300))\r\n\r\n", .headersTooLarge,
      limits: limits)
    refused(
      "GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", .headersTooLarge, limits: limits)
    refused(
      "GET /\(String(repeating: "a", count: 40)) HTTP/1.1\r\nHost: a\r\n\r\n", .uriTooLong, limits: limits)
  }

  func testTruncatedMessageIsAnErrorAtClose() {
    XCTAssertEqual(
      SplitFeeding.outcome("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", finish: true),
      .failure(.truncated))
  }

  func testAFailedParserStaysFailed() {
    var parser = HTTP1Parser(role: .request)
    XCTAssertThrowsError(try parser.feed(Array("GET / HTTP/1.1\nHost: a\n\n".utf8)))
    XCTAssertThrowsError(try parser.feed(Array("GET / HTTP/1.1\r\nHost: a\r\n\r\n".utf8)))
  }
}
