import PinHTTP
import XCTest

@testable import PinProxy

/// A connection's proxy authentication as a value (`ProxyAuthGate`), with
/// real htpasswd hashes checked by the real libxcrypt: a request goes on
/// only with a credential verified against the file in force; the same
/// field again needs no new check; a tunnel inherits its CONNECT's
/// credential until a reload takes the user away.
extension ProxyAuthenticatorTests {

  private func gateHead(_ authorization: String?) throws -> HTTPRequestHead {
    var text = "GET http://origin.test/ HTTP/1.1\r\nHost: origin.test\r\n"
    if let authorization { text += "Proxy-Authorization: \(authorization)\r\n" }
    var parser = HTTP1Parser(role: .request, limits: HTTPLimits(), pausesBetweenMessages: true)
    for case .request(let head) in try parser.feed(Array((text + "\r\n").utf8)) { return head }
    throw HTTPParseError(.badRequest, "no head")
  }

  /// Verifies `authorization` through the gate as the machine would: the
  /// check asks for a hash, the hash is concluded, the gate is told.
  private func verifyThroughGate(
    _ gate: inout ProxyAuthGate, _ request: HTTPRequestHead, _ auth: ProxyAuthenticator, matched: Bool
  ) -> ProxyFailure? {
    guard case .verify(let pending) = gate.admit(request, under: auth, inTunnel: false, client: "c") else {
      XCTFail("a new credential is hashed")
      return nil
    }
    return gate.checked(
      auth.conclude(pending, matched: matched), for: request, under: auth, listenerRefusal: nil)
  }

  func testAGateLetsARequestGoOnOnlyWithAVerifiedCredentialAndTheSameFieldNeedsNoNewCheck() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    var gate = ProxyAuthGate()
    guard case .refuse(let missing) = gate.admit(try gateHead(nil), under: auth, inTunnel: false, client: "c")
    else {
      return XCTFail("no credential: refused")
    }
    XCTAssertEqual(missing.status, 407)
    let wrong = try gateHead(basic("alice", "wrong"))
    XCTAssertEqual(verifyThroughGate(&gate, wrong, auth, matched: false)?.status, 407)
    XCTAssertNil(gate.credential, "a refused credential is not the connection's")
    let right = try gateHead(basic("alice", "right"))
    XCTAssertNil(verifyThroughGate(&gate, right, auth, matched: true))
    XCTAssertEqual(gate.credential?.user, "alice")
    guard case .proceed = gate.admit(right, under: auth, inTunnel: false, client: "c") else {
      return XCTFail("the same field again goes on")
    }
    // Another field on the same connection is checked afresh.
    guard
      case .verify = gate.admit(
        try gateHead(basic("alice", "other")), under: auth, inTunnel: false, client: "c")
    else { return XCTFail("a different field is checked again") }
  }

  func testAGatesTunnelInheritsItsConnectsCredentialUntilAReloadTakesTheUserAway() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    var fresh = ProxyAuthGate()
    guard case .refuse = fresh.admit(try gateHead(nil), under: auth, inTunnel: true, client: "c") else {
      return XCTFail("nothing to inherit: refused")
    }
    var gate = ProxyAuthGate()
    let connect = try gateHead(basic("alice", "right"))
    XCTAssertNil(verifyThroughGate(&gate, connect, auth, matched: true))
    guard case .proceed = gate.admit(try gateHead(nil), under: auth, inTunnel: true, client: "c") else {
      return XCTFail("a request inside the tunnel inherits the CONNECT's credential")
    }
    // The file reloaded without alice: the tunnel is served no more.
    let reloaded = try authenticator([try bcryptLine("bob", "right")])
    guard case .refuse(let gone) = gate.admit(try gateHead(nil), under: reloaded, inTunnel: true, client: "c")
    else {
      return XCTFail("the file in force governs")
    }
    XCTAssertEqual(gone.status, 407)
    // A hash concluded after such a reload, or for a client the new snapshot shuts out, is refused.
    // (A new authenticator: this one has alice's credential cached by now.)
    let uncached = try authenticator([try bcryptLine("alice", "right")])
    var late = ProxyAuthGate()
    guard case .verify(let pending) = late.admit(connect, under: uncached, inTunnel: false, client: "c")
    else {
      return XCTFail()
    }
    let decision = uncached.conclude(pending, matched: true)
    XCTAssertEqual(late.checked(decision, for: connect, under: reloaded, listenerRefusal: nil)?.status, 407)
    let shut = ProxyFailure(status: 403, code: .clientNotAllowed, reason: "not allowed")
    XCTAssertEqual(late.checked(decision, for: connect, under: uncached, listenerRefusal: shut)?.status, 403)
    XCTAssertNil(late.credential)
    XCTAssertNil(late.checked(decision, for: connect, under: uncached, listenerRefusal: nil))
    XCTAssertEqual(late.credential?.user, "alice")
  }

  /// A SOCKS5 client's credential arrives typed (RFC 1929), not as a field:
  /// it is decided as the same field would be, and the gate adopts what the
  /// handshake verified only while the file in force still has it.
  func testATypedCredentialIsDecidedAsItsFieldAndAdoptedOnlyWhileTheFileHasIt() throws {
    let auth = try authenticator([try bcryptLine("alice", "right")])
    let typed = try XCTUnwrap(BasicCredentials(user: Array("alice".utf8), password: Array("right".utf8)))
    guard case .verify(let pending) = auth.check(typed, client: "c") else { return XCTFail("hashed first") }
    guard case .allowed(let verified) = auth.conclude(pending, matched: true) else { return XCTFail() }
    // Cached by the typed check: the field naming the same credential is allowed at once.
    guard case .allowed(let same) = auth.check(basic("alice", "right"), client: "c") else {
      return XCTFail("one cache for both ways in")
    }
    XCTAssertEqual(same, verified)
    var gate = ProxyAuthGate()
    XCTAssertEqual(gate.adopt(nil, under: auth)?.status, 407, "no credential opens nothing")
    XCTAssertNil(gate.credential)
    XCTAssertNil(gate.adopt(verified, under: auth))
    XCTAssertEqual(gate.credential?.user, "alice")
    guard case .proceed = gate.admit(try gateHead(nil), under: auth, inTunnel: true, client: "c") else {
      return XCTFail("requests inside the tunnel inherit the adopted credential")
    }
    let reloaded = try authenticator([try bcryptLine("alice", "changed")])
    var late = ProxyAuthGate()
    XCTAssertEqual(late.adopt(verified, under: reloaded)?.status, 407, "a reload since the check governs")
    XCTAssertNil(late.credential)
  }
}
