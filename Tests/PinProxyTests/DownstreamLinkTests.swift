import Foundation
import PinHTTP
import PinHTTP2
import XCTest

@testable import PinProxy

/// The same responses through both downstream link kinds: `HTTP1Downstream`
/// checked byte for byte, `HTTP2Downstream` by what a real nghttp2 client
/// receives from the real server session it writes into. The exchange
/// machine decides what is sent; these tests pin how each protocol frames it.
final class DownstreamLinkTests: XCTestCase {
  /// An interim response, then a chunked one with trailers.
  static let chunkedWithHints =
    "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
    + "HTTP/1.1 200 OK\r\nX-Origin: yes\r\nTransfer-Encoding: chunked\r\n\r\n"
    + "3\r\nabc\r\n2\r\nde\r\n0\r\nGrpc-Status: 0\r\n\r\n"
  static let noContent = "HTTP/1.1 204 No Content\r\nX-Origin: yes\r\n\r\n"
  /// The answer to a HEAD: the length the body would have had, and no body.
  static let headAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n"

  /// Hands an origin's response to `link` as the exchange machine does:
  /// 1xx as interim, then head, body and end.
  func relay<Link: DownstreamLink>(
    _ text: String, to method: String = "GET", into link: inout Link, from upstream: WireProtocol = .http1
  ) throws {
    var parser = HTTP1Parser(role: .response, limits: HTTPLimits())
    parser.expectResponse(to: method)
    var final = false
    for event in try parser.feed(Array(text.utf8)) {
      switch event {
      case .response(let head) where (100..<200).contains(head.status): link.sendInterim(head)
      case .response(let head):
        final = true
        XCTAssertTrue(link.sendHead(head, upstreamProtocol: upstream))
      case .body(let bytes): link.sendBody(bytes)
      case .end(let trailers): if final { link.end(trailers: trailers) }
      case .request: break
      }
    }
    XCTAssertTrue(final, "no final response in \(text)")
  }

  func http1(_ text: String, to method: String = "GET", client: HTTPVersion = .http11, closing: Bool = false)
    throws -> String
  {
    var link = HTTP1Downstream(clientVersion: client, closing: closing)
    try relay(text, to: method, into: &link)
    return String(decoding: link.takeOutput(), as: UTF8.self)
  }

  /// A request head as the h2 session maps it (for `Refusal`, which reads its Accept).
  func requestHead(_ extra: [HTTP2Header] = []) throws -> HTTPRequestHead {
    let block: [HTTP2Header] =
      [
        .init(":method", "GET"), .init(":scheme", "https"), .init(":authority", "origin.test"),
        .init(":path", "/"),
      ]
      + extra
    return try HTTP2Mapping.requestHead(block, endsStream: true).get()
  }

  static let browser: [HTTP2Header] = [
    .init("user-agent", "Mozilla/5.0 (X11; Linux x86_64)"),
    .init("accept", "text/html,application/xhtml+xml"),
  ]

  static let refused = ProxyFailure.unreachable("origin.test:443 closed the connection without a response")

  // MARK: HTTP/1.1 client

  func testHTTP1RelaysInterimReframesChunkedAndEndsWithTrailers() throws {
    XCTAssertEqual(
      try http1(Self.chunkedWithHints),
      "HTTP/1.1 103 Early Hints\r\n\r\n"
        + "HTTP/1.1 200 OK\r\nX-Origin: yes\r\nTransfer-Encoding: chunked\r\nVia: 1.1 pinproxy\r\n\r\n"
        + "3\r\nabc\r\n2\r\nde\r\n0\r\nGrpc-Status: 0\r\n\r\n")
  }

  func testHTTP1ForAnHTTP10ClientDropsInterimAndEndsTheBodyWithTheConnection() throws {
    var link = HTTP1Downstream(clientVersion: .http10, closing: false)
    try relay(Self.chunkedWithHints, into: &link)
    XCTAssertTrue(link.endsWithConnection)
    XCTAssertFalse(link.chunked)
    XCTAssertEqual(
      String(decoding: link.takeOutput(), as: UTF8.self),
      "HTTP/1.1 200 OK\r\nX-Origin: yes\r\nConnection: close\r\nVia: 1.1 pinproxy\r\n\r\nabcde")
  }

  func testHTTP1NeverRelaysA101() throws {
    var link = HTTP1Downstream(clientVersion: .http11, closing: false)
    link.sendInterim(HTTPResponseHead(status: 101, reason: "Switching Protocols"))
    XCTAssertTrue(link.takeOutput().isEmpty)
  }

  func testHTTP1SaysCloseWhenClosingAndNamesTheUpstreamsProtocolInVia() throws {
    var link = HTTP1Downstream(clientVersion: .http11, closing: true)
    try relay("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", into: &link, from: .http2)
    XCTAssertEqual(
      String(decoding: link.takeOutput(), as: UTF8.self),
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\nVia: 2 pinproxy\r\n\r\nok")
  }

  func testHTTP1BodilessResponsesGetNoBodyAndNoLastChunk() throws {
    XCTAssertEqual(
      try http1(Self.noContent), "HTTP/1.1 204 No Content\r\nX-Origin: yes\r\nVia: 1.1 pinproxy\r\n\r\n")
    XCTAssertEqual(
      try http1(Self.headAnswer, to: "HEAD"),
      "HTTP/1.1 200 OK\r\nContent-Length: 42\r\nVia: 1.1 pinproxy\r\n\r\n")
  }

  func testHTTP1RefusalIsPlainTextOrThePageForABrowser() throws {
    var link = HTTP1Downstream(clientVersion: .http11, closing: false)
    let refusal = Refusal(Self.refused, request: try requestHead())
    link.refuse(refusal, at: Date())
    let text = String(decoding: link.takeOutput(), as: UTF8.self)
    XCTAssertTrue(text.hasPrefix("HTTP/1.1 502 Bad Gateway (pinproxy: upstream-unreachable)\r\n"), text)
    XCTAssertTrue(text.contains("Pinproxy-Error: upstream-unreachable\r\n"), text)
    XCTAssertTrue(text.contains("Pinproxy-Incident: \(refusal.incident)\r\n"), text)
    XCTAssertTrue(text.contains("Content-Type: text/plain; charset=utf-8\r\n"), text)
    XCTAssertTrue(
      text.hasSuffix(
        "\r\n\r\npinproxy: upstream-unreachable: origin.test:443 closed the connection without a response\n"
          + "incident: \(refusal.incident)\n"),
      text)

    link.refuse(Refusal(Self.refused, request: try requestHead(Self.browser)), at: Date())
    let page = String(decoding: link.takeOutput(), as: UTF8.self)
    XCTAssertTrue(page.hasPrefix("HTTP/1.1 502 Bad Gateway (pinproxy: upstream-unreachable)\r\n"), page)
    XCTAssertTrue(page.contains("Pinproxy-Error: upstream-unreachable\r\n"), page)
    XCTAssertTrue(page.contains("Content-Type: text/html; charset=utf-8\r\n"), page)
    XCTAssertTrue(page.contains("<html"), page)
  }

  // MARK: HTTP/2 client

  func testHTTP2SendsStatusViaBodyTrailersAndEndStreamButNoInterim() throws {
    let pair = try HTTP2BackToBack()
    let stream = try pair.request()
    var link = HTTP2Downstream(session: pair.server, stream: stream)
    try relay(Self.chunkedWithHints, into: &link)
    try pair.pump()
    let blocks = pair.blocks(stream)
    XCTAssertEqual(blocks.count, 2, "the final head and the trailers, no 103: \(blocks)")
    XCTAssertEqual(blocks.first?[field: ":status"], "200")
    XCTAssertEqual(blocks.first?[field: "via"], "1.1 pinproxy")
    XCTAssertEqual(blocks.first?[field: "x-origin"], "yes")
    XCTAssertNil(blocks.first?[field: "transfer-encoding"])
    XCTAssertEqual(blocks.last?[field: "grpc-status"], "0")
    XCTAssertEqual(pair.body(stream), Array("abcde".utf8))
    XCTAssertTrue(pair.ended(stream))
  }

  func testHTTP2BodilessResponsesEndWithTheirHeaders() throws {
    let pair = try HTTP2BackToBack()
    let empty = try pair.request()
    var noContent = HTTP2Downstream(session: pair.server, stream: empty)
    try relay(Self.noContent, into: &noContent)
    let head = try pair.request("HEAD")
    var headLink = HTTP2Downstream(session: pair.server, stream: head)
    try relay(Self.headAnswer, to: "HEAD", into: &headLink)
    try pair.pump()

    XCTAssertEqual(pair.blocks(empty).map { $0[field: ":status"] }, ["204"])
    XCTAssertEqual(pair.blocks(empty).first?[field: "via"], "1.1 pinproxy")
    XCTAssertTrue(pair.body(empty).isEmpty)
    XCTAssertTrue(pair.ended(empty))

    XCTAssertEqual(pair.blocks(head).map { $0[field: ":status"] }, ["200"])
    XCTAssertEqual(pair.blocks(head).first?[field: "content-length"], "42")
    XCTAssertTrue(pair.body(head).isEmpty)
    XCTAssertTrue(pair.ended(head))
    XCTAssertTrue(
      pair.clientEvents.contains(.streamClosed(stream: head, errorCode: 0)), "\(pair.clientEvents)")
  }

  /// A refusal's own fields (the 407 challenge, a Retry-After) reach the
  /// client on either protocol.
  func testARefusalsChallengeIsSentOnBothProtocols() throws {
    let challenge = ProxyFailure(
      status: 407, code: .proxyAuthRequired, reason: "no credential",
      headers: [("Proxy-Authenticate", "Basic realm=\"shop\""), ("Retry-After", "2")])
    var http1 = HTTP1Downstream(clientVersion: .http11, closing: false)
    http1.refuse(Refusal(challenge, request: try requestHead()), at: Date())
    let text = String(decoding: http1.takeOutput(), as: UTF8.self)
    XCTAssertTrue(
      text.hasPrefix("HTTP/1.1 407 Proxy Authentication Required (pinproxy: proxy-auth-required)\r\n"), text)
    XCTAssertTrue(text.contains("Proxy-Authenticate: Basic realm=\"shop\"\r\n"), text)
    XCTAssertTrue(text.contains("Retry-After: 2\r\n"), text)

    let pair = try HTTP2BackToBack()
    let stream = try pair.request()
    var http2 = HTTP2Downstream(session: pair.server, stream: stream)
    http2.refuse(Refusal(challenge, request: try requestHead()), at: Date())
    try pair.pump()
    let block = try XCTUnwrap(pair.blocks(stream).first)
    XCTAssertEqual(block[field: ":status"], "407")
    XCTAssertEqual(block[field: "proxy-authenticate"], "Basic realm=\"shop\"")
    XCTAssertEqual(block[field: "retry-after"], "2")
    XCTAssertEqual(block[field: "pinproxy-error"], "proxy-auth-required")
  }

  func testHTTP2RefusalIsPlainTextOrThePageForABrowser() throws {
    let pair = try HTTP2BackToBack()
    let plain = try pair.request()
    var link = HTTP2Downstream(session: pair.server, stream: plain)
    let refusal = Refusal(Self.refused, request: try requestHead())
    link.refuse(refusal, at: Date())
    let browser = try pair.request("GET", "/", Self.browser)
    var pageLink = HTTP2Downstream(session: pair.server, stream: browser)
    pageLink.refuse(Refusal(Self.refused, request: try requestHead(Self.browser)), at: Date())
    try pair.pump()

    // The reason, then the incident id the log line and the operator's page carry.
    let text =
      "pinproxy: upstream-unreachable: origin.test:443 closed the connection without a response\n"
      + "incident: \(refusal.incident)\n"
    let block = try XCTUnwrap(pair.blocks(plain).first)
    XCTAssertEqual(block[field: ":status"], "502")
    XCTAssertEqual(block[field: "pinproxy-error"], "upstream-unreachable")
    XCTAssertEqual(block[field: "content-type"], "text/plain; charset=utf-8")
    XCTAssertEqual(block[field: "cache-control"], "no-store")
    XCTAssertEqual(block[field: "pinproxy-incident"], refusal.incident)
    XCTAssertEqual(block[field: "content-length"], String(text.utf8.count))
    XCTAssertEqual(String(decoding: pair.body(plain), as: UTF8.self), text)
    XCTAssertTrue(pair.ended(plain))

    let page = try XCTUnwrap(pair.blocks(browser).first)
    XCTAssertEqual(page[field: ":status"], "502")
    XCTAssertEqual(page[field: "pinproxy-error"], "upstream-unreachable")
    XCTAssertEqual(page[field: "content-type"], "text/html; charset=utf-8")
    XCTAssertTrue(String(decoding: pair.body(browser), as: UTF8.self).contains("<html"))
    XCTAssertTrue(pair.ended(browser))
  }
}
