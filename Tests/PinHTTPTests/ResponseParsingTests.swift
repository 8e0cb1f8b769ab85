import PinHTTP
import XCTest

final class ResponseParsingTests: XCTestCase {
  func events(
    _ text: String, method: String = "GET", finish: Bool = false, file: StaticString = #filePath,
    line: UInt = #line
  )
    -> [HTTP1Parser.Event]
  {
    guard
      case .events(let events) = SplitFeeding.outcome(
        text, role: .response, method: method, finish: finish, file: file, line: line)
    else {
      XCTFail("expected a valid response", file: file, line: line)
      return []
    }
    return events
  }

  func testLengthChunkedAndCloseDelimitedBodies() {
    XCTAssertEqual(
      events("HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc").dropFirst(),
      [.body(Array("abc".utf8)), .end(trailers: HTTPHeaders())])
    XCTAssertEqual(
      events("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n").dropFirst(),
      [.body(Array("abc".utf8)), .end(trailers: HTTPHeaders())])
    XCTAssertEqual(
      events("HTTP/1.0 200 OK\r\n\r\nuntil close", finish: true).dropFirst(),
      [.body(Array("until close".utf8)), .end(trailers: HTTPHeaders())])
  }

  func testBodilessResponses() {
    XCTAssertEqual(events("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", method: "HEAD").count, 2)
    XCTAssertEqual(events("HTTP/1.1 204 No Content\r\n\r\n").count, 2)
    XCTAssertEqual(events("HTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n").count, 2)
  }

  func testInterimResponseThenFinal() {
    let parsed = events("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
    guard parsed.count == 5, case .response(let interim) = parsed[0], case .response(let final) = parsed[2]
    else {
      return XCTFail("\(parsed)")
    }
    XCTAssertEqual(interim.status, 100)
    XCTAssertEqual(final.status, 201)
  }

  func testStatusWithoutReasonAndKeepAlive() {
    guard
      case .response(let head) = events("HTTP/1.1 404\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")[0]
    else {
      return XCTFail()
    }
    XCTAssertEqual(head.status, 404)
    XCTAssertFalse(head.keepAlive)
  }

  /// RFC 9110 §9.3.6: a 2xx answer to CONNECT has no content whatever its
  /// fields say, and what follows the blank line is the tunnel's; any
  /// other answer is framed as usual.
  func testA2xxAnswerToCONNECTOpensATunnelAndOtherAnswersAreFramed() throws {
    var parser = HTTP1Parser(role: .response)
    parser.expectResponse(to: "CONNECT")
    let events = try parser.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n\u{16}\u{03}\u{01}".utf8))
    guard case .response(let head)? = events.first else { return XCTFail("no head: \(events)") }
    XCTAssertEqual(head.status, 200)
    XCTAssertEqual(events.count, 1, "no body, no end: the connection is a tunnel")
    XCTAssertTrue(parser.isUpgraded)
    XCTAssertEqual(try parser.feed([0x02]), [])
    XCTAssertEqual(parser.takeLeftover(), [0x16, 0x03, 0x01, 0x02])

    var refused = HTTP1Parser(role: .response)
    refused.expectResponse(to: "CONNECT")
    let answer = try refused.feed(Array("HTTP/1.1 407 No\r\nContent-Length: 2\r\n\r\nno".utf8))
    XCTAssertEqual(answer.dropFirst(), [.body(Array("no".utf8)), .end(trailers: HTTPHeaders())])
    XCTAssertFalse(refused.isUpgraded)
  }

  func testMalformedResponsesAreRefused() {
    for text in [
      "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 OK\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
      "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
      "HTTP/1.1 200 OK\nContent-Length: 0\n\n",
    ] {
      XCTAssertEqual(SplitFeeding.outcome(text, role: .response), .failure(.badRequest), text)
    }
  }
}

final class SerializerTests: XCTestCase {
  func testChunkedRoundTrip() throws {
    var parser = HTTP1Parser(role: .request)
    let head = HTTPSerializer.requestHead(
      method: "POST", target: "/", headers: HTTPHeaders([("Host", "a"), ("Transfer-Encoding", "chunked")]))
    let body =
      HTTPSerializer.chunk(Array("hello ".utf8)) + HTTPSerializer.chunk([])
      + HTTPSerializer.chunk(Array("world".utf8))
    let events = SplitFeeding.merge(try parser.feed(head + body + HTTPSerializer.lastChunk()))
    XCTAssertEqual(events.dropFirst(), [.body(Array("hello world".utf8)), .end(trailers: HTTPHeaders())])
  }
}
