import Foundation
import PinTestSupport
import XCTest

/// What a certificate's URLs may make the proxy do: a bounded number of
/// fetches within a daemon-wide memory budget, and never a request to an
/// internal address or to the proxy itself unless configuration named it.
extension RevocationTests {
  /// A leaf for `NAME.revocation.test`, minted now by the revocation
  /// intermediate with `points` as its CRL distribution points, served by
  /// an s_server origin.
  func mintedOrigin(_ name: String, points: [String]) throws -> OpenSSLServer {
    try LeafMint.mint(
      commonName: "\(name).revocation.test", sans: ["\(name).revocation.test"], name: name, in: directory,
      issuer: (Self.pki("intermediate.pem"), Self.pki("intermediate.key")),
      extensions: ["crlDistributionPoints=" + points.map { "URI:\($0)" }.joined(separator: ",")])
    let origin = try OpenSSLServer(
      certificate: directory + "/\(name).pem", key: directory + "/\(name).key",
      chain: Self.pki("intermediate.pem"))
    servers.append(origin)
    return origin
  }

  /// One verified leaf naming 64 distribution points, each streaming 64 MiB
  /// with no declared length (chunked, so nothing is refused at the head):
  /// four are fetched, each cut at the 32 MiB a CRL may have or at the
  /// budget, and what the process ever held resident grows by no more than
  /// the fetch budget (48 MiB) and some slack. Before the budget this took
  /// 1.5 GiB.
  func testSixtyFourHugeDistributionPointsStayWithinTheFetchBudget() throws {
    let origin = try mintedOrigin(
      "big", points: (0..<64).map { "http://crl.revocation.test/big\($0).crl" })
    let responder = try revocationServer()
    _ = try Curl.run(["http://127.0.0.1:\(responder.port)/_mode/chunked-huge"])
    let port = try startProxy(["big": origin.port], revocation: "{crl: require}", fetchPort: responder.port)
    let before = proxy!.child.residentKiB
    let refused = try fetch("big", through: port)
    assertRefused(refused, 502, "revocation-unknown")
    let grown = proxy!.child.peakResidentKiB - before
    print("fetch budget: peak resident grew by \(grown) KiB")
    XCTAssertLessThan(grown, (48 + 24) * 1024, "peak resident grew by \(grown) KiB")
    XCTAssertTrue(refused.text.contains("60 more distribution points not tried"), refused.text)
    let log = try String(contentsOfFile: responder.log, encoding: .utf8)
    let fetched = log.split(separator: "\n").filter { $0.hasPrefix("GET /big") }
    XCTAssertEqual(fetched.count, 4, "only the first four points: \(log)")
    XCTAssertEqual(
      Set(fetched.map { $0.split(separator: " ")[1] }), ["/big0.crl", "/big1.crl", "/big2.crl", "/big3.crl"])
  }

  /// A certificate's distribution points pointing at another loopback
  /// service, the proxy's forward listener, its admin listener, and a name
  /// `connectTo` maps to the forward listener: none is requested.
  func testCertificateURLsNeverReachInternalAddressesOrTheProxysOwnListeners() throws {
    let responder = try revocationServer()
    let (forward, admin) = (try OpenSSLServer.freePort(), try OpenSSLServer.freePort())
    let origin = try mintedOrigin(
      "inward",
      points: [
        "http://127.0.0.1:\(responder.port)/intermediate.crl", "http://127.0.0.1:\(forward)/fwd.crl",
        "http://127.0.0.1:\(admin)/metrics", "http://crl.revocation.test/own.crl",
      ])
    proxy = try ProxyProcess(
      config: """
        admin: {address: "127.0.0.1:\(admin)"}
        listeners:
          - {name: forward, address: "127.0.0.1:\(forward)", mode: forward}
        connectTo: ["inward.revocation.test:443:127.0.0.1:\(origin.port)", "crl.revocation.test:80:127.0.0.1:\(forward)"]
        anchorSets:
          rev: {files: ["\(Self.pki("root.pem"))"]}
        defaults: {action: deny}
        domains:
          - {domain: inward.revocation.test, anchors: [rev], revocation: {crl: require}}
        """, listeners: ["forward", "admin"])
    let refused = try fetch("inward", through: forward)
    assertRefused(refused, 502, "revocation-unknown")
    XCTAssertEqual(
      refused.text.components(separatedBy: "leads to an internal address").count - 1, 4, refused.text)
    let log = (try? String(contentsOfFile: responder.log, encoding: .utf8)) ?? ""
    XCTAssertFalse(log.contains("GET"), "another loopback service was asked: \(log)")
    XCTAssertFalse(proxy!.log.contains("fwd.crl\n") || proxy!.log.contains("path=/fwd.crl"), proxy!.log)
    XCTAssertFalse(proxy!.log.contains("path=/own.crl"), proxy!.log)
    // The proxy's own listener saw one client only: the test's.
    XCTAssertTrue(proxy!.waitForLine { $0.contains(" refused ") }, proxy!.log)
    XCTAssertEqual(proxy!.completeLogLines.filter { $0.contains(" refused ") }.count, 1, proxy!.log)
  }
}
