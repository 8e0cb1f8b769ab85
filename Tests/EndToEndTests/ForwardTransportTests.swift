import Foundation
import PinTestSupport
import XCTest

/// Transport rules per domain: protocol floor, forward secrecy, client certificates.
final class ForwardTransportTests: ProxyTestCase {
  func testTLS10OnlyOriginIsRefusedByAMinimumOfTLS12() throws {
    let legacy = try origin("httpbin", ["--min-tls", "1.0", "--max-tls", "1.0"])
    let port = try startProxy(
      map: ["legacy.httpbin.org": legacy], domains: "  - {domain: legacy.httpbin.org, anchors: [test]}")
    assertRefused(try get("http://legacy.httpbin.org/hello", through: port), 502, "tls-version")
  }

  func testTLS10OnlyOriginIsServedWhenTheRuleAllowsTLS10() throws {
    let legacy = try origin("httpbin", ["--min-tls", "1.0", "--max-tls", "1.0"])
    let port = try startProxy(
      map: ["legacy.httpbin.org": legacy],
      domains: "  - {domain: legacy.httpbin.org, anchors: [test], minimumTLSVersion: \"1.0\"}")
    let result = try get("http://legacy.httpbin.org/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
  }

  func testRSAKeyExchangeOnlyOriginIsRefusedWhenForwardSecrecyIsRequired() throws {
    let rsaOnly = try origin(
      "httpbin", ["--max-tls", "1.2", "--ciphers", "AES128-GCM-SHA256:AES256-GCM-SHA384"])
    let port = try startProxy(
      map: ["rsa.httpbin.org": rsaOnly, "lenient.httpbin.org": rsaOnly],
      domains: """
          - {domain: rsa.httpbin.org, anchors: [test]}
          - {domain: lenient.httpbin.org, anchors: [test], requiresForwardSecrecy: false}
        """)
    assertRefused(try get("http://rsa.httpbin.org/hello", through: port), 502, "weak-cipher")
    XCTAssertEqual(try get("http://lenient.httpbin.org/hello", through: port).status, 200)
  }

  func testOriginDemandingAClientCertificate() throws {
    let mutual = try origin("httpbin", ["--client-ca", Fixtures.path("client-ca.pem")])
    let port = try startProxy(
      map: ["anonymous.httpbin.org": mutual, "identified.httpbin.org": mutual],
      domains: """
          - {domain: anonymous.httpbin.org, anchors: [test]}
          - domain: identified.httpbin.org
            anchors: [test]
            clientIdentity:
              pkcs12: "\(Fixtures.path("client.p12"))"
              passphraseFile: "\(Fixtures.path("client.pass"))"
        """)
    assertRefused(try get("http://anonymous.httpbin.org/hello", through: port), 502, "handshake-failed")
    let result = try get("http://identified.httpbin.org/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertFalse(proxy!.log.contains("correct horse"), "the passphrase must never be logged")
  }

  /// Under TLS 1.3 an origin refuses a missing client certificate after our
  /// side finished the handshake, and a reset can reach us before (and
  /// discard) its alert: the close before any response is still told as
  /// the refused handshake it is, not as an unreachable origin.
  func testAnOriginThatResetsAClientWithoutACertificateRefusedTheHandshake() throws {
    let resetting = try origin(
      "httpbin", ["--client-ca", Fixtures.path("client-ca.pem"), "--reset-without-client-certificate"])
    let port = try startProxy(
      map: ["anonymous.httpbin.org": resetting],
      domains: "  - {domain: anonymous.httpbin.org, anchors: [test]}")
    assertRefused(try get("http://anonymous.httpbin.org/hello", through: port), 502, "handshake-failed")
    XCTAssertTrue(proxy!.child.wait(for: "asked for a client certificate"), proxy!.log)
  }

  func testSlowUpstreamIs504() throws {
    let port = try startProxy(
      map: ["slow.httpbin.org": try origin()], domains: "  - {domain: slow.httpbin.org, anchors: [test]}",
      extra: "timeouts: {upstreamResponse: 1s}")
    let started = Date()
    assertRefused(try get("http://slow.httpbin.org/slow/30", through: port), 504, "upstream-timeout")
    XCTAssertLessThan(Date().timeIntervalSince(started), 15, "the client must not wait for the slow origin")
  }

  func testUnreachableUpstreamIs502() throws {
    let port = try startProxy(
      map: [:], domains: "  - {domain: down.httpbin.org, anchors: [test]}",
      closedPorts: ["down.httpbin.org": try OpenSSLServer.closedPort()])
    let result = try get("http://down.httpbin.org/hello", through: port)
    assertRefused(result, 502, "upstream-unreachable")
    // The client learns the target only; why it failed is for the operator's log.
    XCTAssertFalse(result.text.contains("refused"), result.text)
    XCTAssertTrue(proxy!.child.wait(for: "Connection refused"), proxy!.log)
  }
}
