import PinTrust
import XCTest

@_spi(Fuzzing) @testable import PinProxy

/// The SOCKS5 handshake byte for byte (RFC 1928, RFC 1929): each step's
/// reply, the bounds, and the fuzz harness's properties on its corpus shapes.
final class SocksHandshakeTests: XCTestCase {
  func feed(_ handshake: inout SocksHandshake, _ bytes: [UInt8]) -> SocksHandshake.Step {
    bytes.withUnsafeBytes { handshake.feed($0) }
  }

  func testNoAuthenticationThenConnectByName() throws {
    var handshake = SocksHandshake(requiresPassword: false)
    XCTAssertEqual(feed(&handshake, [5, 2, 2, 0]), .reply([5, 0]))
    XCTAssertEqual(handshake.step(), .more)
    // The request in two pieces, with early bytes after it.
    XCTAssertEqual(feed(&handshake, [5, 1, 0, 3, 11] + Array("example".utf8)), .more)
    let step = feed(&handshake, Array(".com".utf8) + [1, 187, 0x16, 3])
    XCTAssertEqual(
      step, .connect(host: try XCTUnwrap(TrustHost("example.com")), port: 443, early: [0x16, 3]))
  }

  func testPasswordRequiredAndChecked() {
    var handshake = SocksHandshake(requiresPassword: true)
    guard case .fail(let refused, _) = feed(&handshake, [5, 1, 0]) else { return XCTFail("no method") }
    XCTAssertEqual(refused, [5, 0xff])
    handshake = SocksHandshake(requiresPassword: true)
    XCTAssertEqual(feed(&handshake, [5, 1, 2]), .reply([5, 2]))
    XCTAssertEqual(
      feed(&handshake, [1, 5] + Array("alice".utf8) + [2] + Array("pw".utf8)),
      .check(BasicCredentials(user: Array("alice".utf8), password: Array("pw".utf8))!))
    XCTAssertEqual(handshake.credentialChecked(false, reason: "no"), .fail(reply: [1, 1], reason: "no"))
    handshake = SocksHandshake(requiresPassword: true)
    _ = feed(&handshake, [5, 1, 2])
    _ = feed(&handshake, [1, 1, 0x61, 1, 0x62])
    XCTAssertEqual(handshake.credentialChecked(true, reason: ""), .reply([1, 0]))
    XCTAssertEqual(
      feed(&handshake, [5, 1, 0, 4] + Array(repeating: 0, count: 15) + [1, 0, 80]),
      .connect(host: TrustHost("::1")!, port: 80, early: []))
  }

  /// RFC 1929 names a user in bytes; those no Basic credential could carry
  /// (a colon splits `user:password`, control characters, bytes that are
  /// not UTF-8) are refused before any check, so both ways in name the
  /// same users.
  func testAUserNameNoBasicCredentialCouldCarryIsRefusedUnchecked() {
    for name: [UInt8] in [Array("a:b".utf8), [0x61, 0x0a], [0xff, 0xfe], [0x7f]] {
      var handshake = SocksHandshake(requiresPassword: true)
      _ = feed(&handshake, [5, 1, 2])
      let step = feed(&handshake, [1, UInt8(name.count)] + name + [2] + Array("pw".utf8))
      guard case .fail(let reply, _) = step else { return XCTFail("\(name): \(step)") }
      XCTAssertEqual(reply, [1, 1], "\(name)")
    }
    var accepted = SocksHandshake(requiresPassword: true)
    _ = feed(&accepted, [5, 1, 2])
    XCTAssertEqual(
      feed(&accepted, [1, 6] + Array("zoë-1".utf8) + [1, 0x78]),
      .check(BasicCredentials(user: Array("zoë-1".utf8), password: [0x78])!))
  }

  func testCommandsAddressTypesAndBounds() {
    func request(_ bytes: [UInt8]) -> SocksHandshake.Step {
      var handshake = SocksHandshake(requiresPassword: false)
      _ = feed(&handshake, [5, 1, 0])
      return feed(&handshake, bytes)
    }
    guard case .fail(let bind, _) = request([5, 2, 0, 1, 1, 2, 3, 4, 0, 80]) else { return XCTFail("BIND") }
    XCTAssertEqual(bind, SocksHandshake.reply(.commandNotSupported))
    guard case .fail(let type, _) = request([5, 1, 0, 7, 0, 0]) else { return XCTFail("address type") }
    XCTAssertEqual(type, SocksHandshake.reply(.addressTypeNotSupported))
    guard case .fail(let port, _) = request([5, 1, 0, 1, 1, 2, 3, 4, 0, 0]) else { return XCTFail("port 0") }
    XCTAssertEqual(port, SocksHandshake.reply(.generalFailure))
    // What waits unparsed (sent ahead while a credential is checked) is bounded.
    var eager = SocksHandshake(requiresPassword: true)
    _ = feed(&eager, [5, 1, 2])
    let ahead = [UInt8](repeating: 0x41, count: SocksHandshake.maximumBuffered + 1)
    XCTAssertEqual(
      feed(&eager, [1, 1, 0x61, 1, 0x62] + ahead), .check(BasicCredentials(user: [0x61], password: [0x62])!))
    guard case .fail(nil, _) = eager.step() else { return XCTFail("the bound") }
    var socks4 = SocksHandshake(requiresPassword: false)
    guard case .fail(nil, _) = feed(&socks4, [4, 1, 0, 80]) else { return XCTFail("SOCKS4") }
  }

  func testTheFuzzPropertiesHoldOnHandwrittenInputs() {
    let inputs: [[UInt8]] = [
      [0x10, 5, 1, 0, 5, 1, 0, 3, 3] + Array("a.b".utf8) + [0, 80],
      [0x23, 5, 1, 2, 1, 1, 0x61, 1, 0x62, 5, 1, 0, 1, 10, 0, 0, 1, 1, 187],
      [0x01, 5, 1, 2, 1, 1, 0x61, 1, 0x62],
      [0xff] + Array(repeating: 5, count: 2000),
    ]
    for input in inputs { XCTAssertNil(SocksFuzzing.run(input), "\(input.prefix(12))") }
  }
}

/// The reply a refused CONNECT gets comes from the failure's code and the
/// dial's outcome, never from the words of its reason.
final class SocksReplyCodeTests: XCTestCase {
  func testTheDialOutcomeNotTheReasonChoosesTheReply() {
    let refused = ProxyFailure.cannotConnect("down.test:443", detail: "Connection refused", refused: true)
    XCTAssertEqual(SocksHandshake.ReplyCode(refused), .connectionRefused)
    let noRoute = ProxyFailure.cannotConnect("down.test:443", detail: "No route to host")
    XCTAssertEqual(SocksHandshake.ReplyCode(noRoute), .hostUnreachable)
    let misleading = ProxyFailure.unreachable("the origin refused us, says this reason")
    XCTAssertEqual(SocksHandshake.ReplyCode(misleading), .hostUnreachable)
    XCTAssertEqual(SocksHandshake.ReplyCode(.timeout("no connection within 5 s")), .ttlExpired)
    XCTAssertEqual(
      SocksHandshake.ReplyCode(ProxyFailure(status: 403, code: .deniedByPolicy, reason: "no rule")),
      .notAllowedByRuleset)
  }
}
