import PinHTTP
import XCTest

@testable import PinProxy

/// Asking a parent proxy for a tunnel, byte for byte and sans I/O: what is
/// sent to an HTTP and a SOCKS5 parent, and every answer a parent may give
/// (yes, no, garbage, split anywhere). The real parents (Squid, a SOCKS5
/// server) are in the end-to-end tests.
final class ParentTunnelTests: XCTestCase {
  func feed(_ tunnel: inout ParentTunnel, _ bytes: [UInt8]) -> ParentTunnel.Step {
    bytes.withUnsafeBytes { tunnel.received($0) }
  }

  func text(_ step: ParentTunnel.Step) -> String? {
    guard case .send(let bytes) = step else { return nil }
    return String(decoding: bytes, as: UTF8.self)
  }

  // MARK: HTTP CONNECT

  func testAnHTTPParentIsSentACONNECTWithBasicCredentialsAndItsYesOpensTheTunnel() {
    var tunnel = ParentTunnel(
      kind: .http, host: "origin.test", port: 443,
      credentials: .init(user: Array("alice".utf8), password: Array("s3cret:x".utf8)))
    XCTAssertEqual(
      text(tunnel.start()),
      "CONNECT origin.test:443 HTTP/1.1\r\nHost: origin.test:443\r\n"
        + "Proxy-Authorization: Basic YWxpY2U6czNjcmV0Ong=\r\n\r\n")
    XCTAssertEqual(feed(&tunnel, Array("HTTP/1.1 200 Connection est".utf8)), .wait)
    // What follows the blank line belongs to the tunnel, not to the answer.
    XCTAssertEqual(
      feed(&tunnel, Array("ablished\r\nContent-Length: 5\r\n\r\n\u{16}\u{03}".utf8)),
      .established(leftover: [0x16, 0x03]))
  }

  func testAnHTTPParentsNoIsItsStatusLineAndAnIPv6HostIsBracketed() {
    var tunnel = ParentTunnel(kind: .http, host: "2001:db8::1", port: 8443, credentials: nil)
    XCTAssertEqual(
      text(tunnel.start()), "CONNECT [2001:db8::1]:8443 HTTP/1.1\r\nHost: [2001:db8::1]:8443\r\n\r\n")
    XCTAssertEqual(
      feed(
        &tunnel,
        Array(
          "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=x\r\nContent-Length: 3\r\n\r\nno!"
            .utf8)),
      .refused("407 Proxy Authentication Required"))
  }

  func testAnInterimAnswerIsPassedOverAndGarbageIsMalformed() {
    var tunnel = ParentTunnel(kind: .http, host: "origin.test", port: 443, credentials: nil)
    _ = tunnel.start()
    XCTAssertEqual(
      feed(&tunnel, Array("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 200 OK\r\n\r\n".utf8)),
      .established(leftover: []))
    var garbage = ParentTunnel(kind: .http, host: "origin.test", port: 443, credentials: nil)
    _ = garbage.start()
    guard case .malformed = feed(&garbage, Array("SSH-2.0-OpenSSH\r\n\r\n".utf8)) else {
      return XCTFail("a non-HTTP answer must be malformed")
    }
  }

  func testAnAnswerHeadBeyondItsBoundIsMalformedNotBuffered() {
    var tunnel = ParentTunnel(kind: .http, host: "origin.test", port: 443, credentials: nil)
    _ = tunnel.start()
    var step = feed(&tunnel, Array("HTTP/1.1 200 OK\r\n".utf8))
    let field = Array("X-Filler: \(String(repeating: "a", count: 1000))\r\n".utf8)
    for _ in 0..<40 where step == .wait { step = feed(&tunnel, field) }
    guard case .malformed = step else { return XCTFail("an endless answer head must fail: \(step)") }
  }

  // MARK: SOCKS5

  func testASocks5ParentWithCredentialsGetsRFC1929ThenAConnectByName() {
    var tunnel = ParentTunnel(
      kind: .socks5, host: "origin.test", port: 443,
      credentials: .init(user: Array("bob".utf8), password: Array("pw".utf8)))
    XCTAssertEqual(tunnel.start(), .send([5, 1, 2]))
    XCTAssertEqual(feed(&tunnel, [5]), .wait)
    XCTAssertEqual(feed(&tunnel, [2]), .send([1, 3] + Array("bob".utf8) + [2] + Array("pw".utf8)))
    XCTAssertEqual(
      feed(&tunnel, [1, 0]), .send([5, 1, 0, 3, 11] + Array("origin.test".utf8) + [0x01, 0xBB]))
    // The reply names the bound address (here a domain), then tunnel bytes.
    XCTAssertEqual(feed(&tunnel, [5, 0, 0, 3, 4] + Array("bnd.".utf8)), .wait)
    XCTAssertEqual(feed(&tunnel, [0x1F, 0x90, 0x16]), .established(leftover: [0x16]))
  }

  func testASocks5ParentWithoutCredentialsAndLiteralAddresses() {
    var v4 = ParentTunnel(kind: .socks5, host: "192.0.2.7", port: 8443, credentials: nil)
    XCTAssertEqual(v4.start(), .send([5, 1, 0]))
    XCTAssertEqual(feed(&v4, [5, 0]), .send([5, 1, 0, 1, 192, 0, 2, 7, 0x20, 0xFB]))
    XCTAssertEqual(feed(&v4, [5, 0, 0, 1, 127, 0, 0, 1, 0, 80]), .established(leftover: []))
    var v6 = ParentTunnel(kind: .socks5, host: "::1", port: 443, credentials: nil)
    _ = v6.start()
    XCTAssertEqual(
      feed(&v6, [5, 0]), .send([5, 1, 0, 4] + [UInt8](repeating: 0, count: 15) + [1, 0x01, 0xBB]))
  }

  func testSocks5RefusalsSayWhatTheParentMeant() {
    var refusedReply = ParentTunnel(kind: .socks5, host: "origin.test", port: 443, credentials: nil)
    _ = refusedReply.start()
    _ = feed(&refusedReply, [5, 0])
    XCTAssertEqual(
      feed(&refusedReply, [5, 5, 0, 1, 0, 0, 0, 0, 0, 0]), .refused("SOCKS5 reply 5: connection refused"))

    var wantsCredentials = ParentTunnel(kind: .socks5, host: "origin.test", port: 443, credentials: nil)
    _ = wantsCredentials.start()
    XCTAssertEqual(
      feed(&wantsCredentials, [5, 0xFF]),
      .refused("no acceptable authentication method (it wants credentials)"))

    var badPassword = ParentTunnel(
      kind: .socks5, host: "origin.test", port: 443,
      credentials: .init(user: Array("u".utf8), password: Array("p".utf8)))
    _ = badPassword.start()
    _ = feed(&badPassword, [5, 2])
    XCTAssertEqual(feed(&badPassword, [1, 1]), .refused("the username and password were refused"))
  }

  func testSocks5AnswersOutsideTheProtocolAreMalformed() {
    var notSocks = ParentTunnel(kind: .socks5, host: "origin.test", port: 443, credentials: nil)
    _ = notSocks.start()
    guard case .malformed = feed(&notSocks, Array("HTTP/1.1 400 Bad Request\r\n".utf8)) else {
      return XCTFail("an HTTP answer to a SOCKS5 greeting must be malformed")
    }
    // Username/password chosen though none was offered.
    var unoffered = ParentTunnel(kind: .socks5, host: "origin.test", port: 443, credentials: nil)
    _ = unoffered.start()
    guard case .malformed = feed(&unoffered, [5, 2]) else { return XCTFail("an unoffered method was taken") }
    var badType = ParentTunnel(kind: .socks5, host: "origin.test", port: 443, credentials: nil)
    _ = badType.start()
    _ = feed(&badType, [5, 0])
    guard case .malformed = feed(&badType, [5, 0, 0, 9, 0, 0, 0]) else {
      return XCTFail("an unknown address type must be malformed")
    }
  }
}
