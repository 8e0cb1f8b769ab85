import PinHTTP
import XCTest

/// The heads the proxy sends on: hop-by-hop fields gone, framing written from
/// the parser's decision. Each case parses a head, builds the forwarded one,
/// and parses that again as the next hop would.
final class ForwardedHeadTests: XCTestCase {
  func request(_ text: String) throws -> HTTPRequestHead {
    var parser = HTTP1Parser(role: .request)
    let events = try parser.feed(Array(text.utf8))
    guard case .request(let head)? = events.first else { throw HTTPParseError(.badRequest, "no head") }
    return head
  }

  /// The forwarded request as the origin parses it: its head and body bytes.
  func forwarded(_ text: String) throws -> (HTTPRequestHead, [UInt8]) {
    var parser = HTTP1Parser(role: .request)
    let events = try parser.feed(Array(text.utf8))
    guard case .request(let head)? = events.first else { throw HTTPParseError(.badRequest, "no head") }
    var body: [UInt8] = []
    for case .body(let bytes) in events { body += bytes }
    var wire = ForwardedHead.request(head, target: "/a", authority: "origin.test", via: "1.1 pinproxy")
    wire += head.framing == .chunked ? HTTPSerializer.chunk(body) + HTTPSerializer.lastChunk() : body
    var origin = HTTP1Parser(role: .request)
    let seen = try origin.feed(wire)
    guard case .request(let originHead)? = seen.first, case .end? = seen.last else {
      throw HTTPParseError(.badRequest, "origin did not see one whole request")
    }
    XCTAssertFalse(origin.hasBufferedInput, "bytes after the forwarded request")
    var originBody: [UInt8] = []
    for case .body(let bytes) in seen { originBody += bytes }
    return (originHead, originBody)
  }

  func testHopByHopFieldsAreStripped() throws {
    let head = try request(
      "GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\n"
        + "Keep-Alive: timeout=5\r\nProxy-Authorization: Basic abc\r\nTE: trailers\r\nUpgrade: h2c\r\n"
        + "Proxy-Connection: keep-alive\r\nAccept: */*\r\nTrailer: X\r\n\r\n")
    let wire = ForwardedHead.request(head, target: "/", authority: "a", via: "1.1 pinproxy")
    XCTAssertEqual(
      String(decoding: wire, as: UTF8.self),
      "GET / HTTP/1.1\r\nHost: a\r\nAccept: */*\r\nVia: 1.1 pinproxy\r\n\r\n")
  }

  func testConnectionCannotNameTheFramingAway() throws {
    let smuggled = "GET /smuggled HTTP/1.1\r\nHost: origin.test\r\n\r\n"
    for connection in [
      "Connection: Content-Length", "Proxy-Connection: Content-Length", "Connection: close, Content-Length",
    ] {
      let (head, body) = try forwarded(
        "POST http://origin.test/a HTTP/1.1\r\nHost: origin.test\r\n\(connection)\r\n"
          + "Content-Length: \(smuggled.utf8.count)\r\n\r\n\(smuggled)")
      XCTAssertEqual(head.framing, .length(smuggled.utf8.count), connection)
      XCTAssertEqual(body, Array(smuggled.utf8), connection)
    }
  }

  func testConnectionCannotNameTransferEncodingOrHostAway() throws {
    let (head, body) = try forwarded(
      "POST http://origin.test/a HTTP/1.1\r\nHost: origin.test\r\nConnection: Transfer-Encoding, Host\r\n"
        + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
    XCTAssertEqual(head.framing, .chunked)
    XCTAssertEqual(body, Array("abc".utf8))
    XCTAssertEqual(head.headers.values("Host"), ["origin.test"])
  }

  func testDuplicateLengthsAreForwardedAsOneNormalisedValue() throws {
    for lengths in ["Content-Length: 5\r\nContent-Length: 5", "Content-Length: 5, 5", "Content-Length: 005"] {
      let (head, _) = try forwarded("POST http://o/a HTTP/1.1\r\nHost: o\r\n\(lengths)\r\n\r\nhello")
      XCTAssertEqual(head.headers.values("Content-Length"), ["5"], lengths)
    }
  }

  func testHostIsTheUpstreamAuthorityOnly() throws {
    let (head, _) = try forwarded("GET http://o/a HTTP/1.1\r\nHost: elsewhere\r\n\r\n")
    XCTAssertEqual(head.headers.values("Host"), ["origin.test"])
  }

  func testObsTextIsForwardedByteForByte() throws {
    var bytes = Array("GET http://o/ HTTP/1.1\r\nHost: o\r\nX-Obs: caf".utf8)
    bytes += [0xe9, 0x20, 0xff]
    bytes += Array("\r\n\r\n".utf8)
    var parser = HTTP1Parser(role: .request)
    guard case .request(let head)? = try parser.feed(bytes).first else { return XCTFail("no head") }
    let wire = ForwardedHead.request(head, target: "/", authority: "o", via: "v")
    let needle: [UInt8] = Array("X-Obs: caf".utf8) + [0xe9, 0x20, 0xff, 0x0d, 0x0a]
    XCTAssertNotNil(wire.firstRange(of: needle), String(decoding: wire, as: UTF8.self))
  }

  func testTrailersLoseFramingAndRoutingFields() {
    let trailers = HTTPHeaders([
      ("X-Checksum", "1"), ("Content-Length", "9"), ("Transfer-Encoding", "chunked"), ("Host", "evil"),
      ("Authorization", "x"),
    ])
    XCTAssertEqual(ForwardedHead.trailers(trailers).fields.map(\.name), ["X-Checksum"])
  }

  func testResponseFramingFollowsTheParser() throws {
    func response(_ text: String, method: String = "GET", client: HTTPVersion = .http11) throws -> (
      String, ForwardedHead.ClientFraming
    ) {
      var parser = HTTP1Parser(role: .response)
      parser.expectResponse(to: method)
      guard case .response(let head)? = try parser.feed(Array(text.utf8)).first else {
        throw HTTPParseError(.badRequest, "no head")
      }
      let (bytes, framing) = ForwardedHead.response(head, clientVersion: client, closing: false, via: "v")
      return (String(decoding: bytes, as: UTF8.self), framing)
    }
    let (withLength, lengthFraming) = try response(
      "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 2\r\n\r\nok")
    XCTAssertEqual(lengthFraming, .length(2))
    XCTAssertTrue(withLength.contains("Content-Length: 2\r\n"), withLength)
    let (chunked, chunkedFraming) = try response(
      "HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n")
    XCTAssertEqual(chunkedFraming, .chunked)
    XCTAssertTrue(chunked.contains("Transfer-Encoding: chunked\r\n"), chunked)
    let (_, oldClient) = try response("HTTP/1.1 200 OK\r\n\r\n", client: .http10)
    XCTAssertEqual(oldClient, .untilClose)
    let (head, headFraming) = try response("HTTP/1.1 200 OK\r\nContent-Length: 7, 7\r\n\r\n", method: "HEAD")
    XCTAssertEqual(headFraming, .none)
    XCTAssertTrue(head.contains("Content-Length: 7\r\n") && !head.contains("7, 7"), head)
  }
}
