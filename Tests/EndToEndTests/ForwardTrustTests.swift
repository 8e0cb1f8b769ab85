import Foundation
import PinTestSupport
import XCTest

/// `pinproxy run` in forward mode driven by `curl -x`, against real TLS
/// origins, one trust scenario per test. Every expectation checks the status
/// and the `Pinproxy-Error` code.
final class ForwardTrustTests: ProxyTestCase {
  func testValidChainIsServed() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}")
    let result = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(result.status, 200)
    XCTAssertNil(result.pinproxyError)
    XCTAssertEqual(result.text, "hello from origin\n")
    XCTAssertEqual(result.headers["via"], "1.1 pinproxy")
  }

  func testPinnedKeyIsServed() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()],
      domains: publicKeyRule(pin: Fixtures.certificate("int-a.pem").spkiPin))
    let result = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertNil(result.pinproxyError)
  }

  func testWrongPinIsRefusedAndLoggedWithTheChain() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()],
      domains: publicKeyRule(pin: Fixtures.certificate("adn.pem").spkiPin))
    assertRefused(try get("http://httpbin.org/hello", through: port), 502, "pin-mismatch")
    let leafPin = Fixtures.certificate("httpbin.pem").spkiPin
    XCTAssertTrue(proxy!.child.wait(for: "code=pin-mismatch"), proxy!.log)
    let line = proxy!.log.split(separator: "\n").first { $0.contains("code=pin-mismatch") } ?? ""
    XCTAssertTrue(line.contains("client=127.0.0.1:"), String(line))
    XCTAssertTrue(line.contains("host=httpbin.org:443") && line.contains("rule=httpbin.org"), String(line))
    XCTAssertTrue(line.contains(leafPin) && line.contains("sha256="), String(line))
  }

  func testExpiredChainIsRefused() throws {
    let port = try startProxy(
      map: ["expired.httpbin.org": try origin("expired")],
      domains: "  - {domain: expired.httpbin.org, anchors: [test]}")
    assertRefused(try get("http://expired.httpbin.org/hello", through: port), 502, "expired")
  }

  func testWrongHostIsRefused() throws {
    let port = try startProxy(
      map: ["alpha.net": try origin()], domains: "  - {domain: alpha.net, anchors: [test]}")
    assertRefused(try get("http://alpha.net/hello", through: port), 502, "hostname-mismatch")
  }

  func testSelfSignedPinnedCertificateWithAllowInvalidIsServed() throws {
    let selfSigned = try Origin(certificate: Fixtures.path("altname.pem"), key: Fixtures.path("altname.key"))
    origins.append(selfSigned)
    let port = try startProxy(
      map: ["foobar.com": selfSigned],
      domains: """
          - domain: foobar.com
            anchors: [test]
            pinningMode: certificate
            pinnedCertificates: ["\(Fixtures.path("altname.pem"))"]
            allowInvalidCertificates: true
        """)
    let result = try get("http://foobar.com/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertNil(result.pinproxyError)
  }

  func testUntrustedRootIsRefused() throws {
    let port = try startProxy(
      map: ["alpha.net": try origin("adn")], domains: "  - {domain: alpha.net, anchors: [test]}")
    assertRefused(try get("http://alpha.net/hello", through: port), 502, "untrusted-chain")
  }

  func testWeakKeyIsRefused() throws {
    let port = try startProxy(
      map: ["weak.httpbin.org": try origin("weak", ["--ciphers", "DEFAULT@SECLEVEL=0"])],
      domains: "  - {domain: weak.httpbin.org, anchors: [test]}")
    assertRefused(try get("http://weak.httpbin.org/hello", through: port), 502, "weak-key")
  }

  func testUnlistedHostIsDeniedWith403AndNeverConnected() throws {
    let origin = try origin()
    let port = try startProxy(
      map: ["example.com": origin], domains: "  - {domain: httpbin.org, anchors: [test]}")
    assertRefused(try get("http://example.com/hello", through: port), 403, "denied-by-policy")
    XCTAssertEqual(origin.requests, [])
  }

  func testPlainHTTPGoesOverTLSUnlessInsecureLoadsAreAllowed() throws {
    // The origin only speaks TLS, so a plain-HTTP upstream attempt cannot succeed.
    let port = try startProxy(
      map: ["httpbin.org": try origin()],
      domains: "  - {domain: httpbin.org, anchors: [test], allowsInsecureHTTPLoads: true}",
      extra: "")
    let insecure = try get("http://httpbin.org:443/hello", through: port)
    XCTAssertEqual(insecure.status, 502, insecure.text)
    XCTAssertEqual(insecure.pinproxyError, "upstream-unreachable")
    // curl sends https:// through a proxy as CONNECT; absolute-form https goes raw.
    let secure = try RawHTTP.exchange(
      port: port, "GET https://httpbin.org/hello HTTP/1.1\r\nHost: httpbin.org\r\nConnection: close\r\n\r\n")
    XCTAssertTrue(secure.hasPrefix("HTTP/1.1 200 "), secure)
    XCTAssertTrue(secure.hasSuffix("hello from origin\n"), secure)
  }

  /// httpbin.org under the test anchors, pinned to one SPKI hash.
  func publicKeyRule(pin: String) -> String {
    """
      - domain: httpbin.org
        anchors: [test]
        pinningMode: publicKey
        pinnedPublicKeyHashes: ["\(pin)"]
    """
  }
}
