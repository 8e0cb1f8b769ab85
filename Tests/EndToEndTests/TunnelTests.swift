import Foundation
import PinTestSupport
import XCTest

/// Tunnel listeners: raw bytes from a client that cannot use a proxy,
/// spliced to one fixed upstream over pinned TLS.
final class TunnelTests: ProxyTestCase {
  func startTunnels(origin: Origin) throws -> ProxyProcess {
    _ = try startProxy(
      map: ["httpbin.org": origin, "wrong.httpbin.org": origin],
      domains: """
          - {domain: httpbin.org, anchors: [test]}
          - domain: wrong.httpbin.org
            anchors: [test]
            pinningMode: publicKey
            pinnedPublicKeyHashes: ["\(Fixtures.certificate("adn.pem").spkiPin)"]
        """,
      listeners: """
          - {name: bank, address: "127.0.0.1:{port:bank}", mode: tunnel, upstream: "httpbin.org:443"}
          - {name: pinned, address: "127.0.0.1:{port:pinned}", mode: tunnel, upstream: "wrong.httpbin.org:443"}
        """,
      names: ["bank", "pinned"])
    return proxy!
  }

  func testPlainClientReachesTheOriginOverVerifiedTLS() throws {
    let origin = try origin()
    let tunnels = try startTunnels(origin: origin)
    let bank = tunnels.ports["bank"]!
    for _ in 0..<2 {
      let result = try Curl.run(["http://127.0.0.1:\(bank)/hello"])
      XCTAssertEqual(result.status, 200, result.stderr)
      XCTAssertEqual(result.text, "hello from origin\n")
    }
    let upload = try RawHTTP.exchange(
      port: bank,
      "POST /echo HTTP/1.1\r\nHost: httpbin.org\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello")
    XCTAssertTrue(
      upload.hasSuffix("5 2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\n"), upload)
  }

  func testRefusedUpstreamClosesTheClientAndLogsWhy() throws {
    let origin = try origin()
    let tunnels = try startTunnels(origin: origin)
    let response = try RawHTTP.exchange(
      port: tunnels.ports["pinned"]!, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    XCTAssertEqual(response, "", "a refused tunnel sends nothing back")
    XCTAssertTrue(tunnels.child.wait(for: "code=pin-mismatch"), tunnels.log)
    XCTAssertEqual(origin.requests, [])
  }

  func testHalfCloseFromTheClientStillDeliversTheResponse() throws {
    let origin = try origin()
    let tunnels = try startTunnels(origin: origin)
    // The request, then FIN from the client; the origin's answer must still come back.
    let fd = try XCTUnwrap(Loopback.connect(port: tunnels.ports["bank"]!))
    defer { close(fd) }
    Loopback.send(fd, "GET /hello HTTP/1.1\r\nHost: httpbin.org\r\nConnection: close\r\n\r\n")
    shutdown(fd, Int32(SHUT_WR))
    let text = Loopback.readAll(fd)
    XCTAssertTrue(text.hasPrefix("HTTP/1.1 200") && text.hasSuffix("hello from origin\n"), text)
  }

  func testDownstreamTLSTunnelPresentsALeafFromTheLocalCA() throws {
    let origin = try origin()
    _ = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}",
      listeners: """
          - {name: secure, address: "127.0.0.1:{port:secure}", mode: tunnel, upstream: "httpbin.org:443", downstreamTLS: true}
        """,
      names: ["secure"])
    let secure = proxy!.ports["secure"]!
    let ca = proxy!.directory.appendingPathComponent("state/ca.pem").path
    let result = try Curl.run([
      "-v", "--cacert", ca, "--resolve", "httpbin.org:\(secure):127.0.0.1",
      "https://httpbin.org:\(secure)/hello",
    ])
    XCTAssertEqual(result.status, 200, result.stderr)
    XCTAssertEqual(result.text, "hello from origin\n")
    XCTAssertTrue(result.stderr.contains("issuer: O=pinproxy; CN=pinproxy local CA"), result.stderr)
  }
}
