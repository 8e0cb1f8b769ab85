import Foundation
import PinConfig
import PinProxy
import PinTestSupport
import PinTrust
import XCTest

final class TrustSnapshotTests: XCTestCase {
  func testMissingAndUnparsablePinFilesNameTheirLineAndKey() throws {
    let config = try TemporaryConfig(
      """
      domains:
        - domain: example.com
          pinningMode: certificate
          pinnedCertificates: [missing.pem, garbage.pem]
      """, files: ["garbage.pem": Fixtures.path("httpbin.key")])
    defer { config.remove() }
    let found = config.errors().map(\.description)
    XCTAssertEqual(found.count, 2, "\(found)")
    XCTAssertTrue(
      found[0].contains(
        ":4:26: domains[0].pinnedCertificates[0]: \(config.directory.path)/missing.pem: no such file"),
      found[0])
    XCTAssertTrue(found[1].contains(":4:39: domains[0].pinnedCertificates[1]: "), found[1])
    XCTAssertTrue(found[1].contains("no CERTIFICATE"), found[1])
  }

  func testUnknownAnchorSetIsLocated() throws {
    let config = try TemporaryConfig(
      """
      anchorSets:
        national: {files: [root.pem]}
      domains:
        - domain: example.com
          anchors: [system, nationl]
      """, files: ["root.pem": Fixtures.path("root-a.pem")])
    defer { config.remove() }
    let found = config.errors().map(\.description)
    XCTAssertEqual(found.count, 1, "\(found)")
    XCTAssertTrue(
      found[0].contains(
        ":5:14: domains[0].anchors: unknown anchor set \"nationl\" (known: national, system)"), found[0])
  }

  func testRoutingUsesRulesThenDefaultsOrDenies() throws {
    let config = try TemporaryConfig(
      """
      defaults: {action: deny}
      domains:
        - {domain: example.com, includesSubdomains: true}
      """)
    defer { config.remove() }
    let snapshot = try TrustSnapshot.compile(try ConfigurationParser.load(file: config.file), generation: 7)
    guard case .rule(let index, _, let policy) = snapshot.route(Fixtures.host("www.example.com")) else {
      return XCTFail("expected the example.com rule")
    }
    XCTAssertEqual(index, 0)
    XCTAssertEqual(policy.identity, PolicyIdentity(generation: 7, rule: .domain(0)))
    guard case .denied = snapshot.route(Fixtures.host("example.org")) else { return XCTFail("expected deny") }
  }

  func testRuleDecidesWithItsOwnAnchorsAndPins() throws {
    let config = try TemporaryConfig(
      """
      anchorSets:
        national: {files: [root.pem]}
      domains:
        - domain: httpbin.org
          anchors: [national]
          pinningMode: publicKey
          pinnedCertificates: [int.pem]
        - domain: alpha.net
          anchors: [national]
      """, files: ["root.pem": Fixtures.path("root-a.pem"), "int.pem": Fixtures.path("int-a.pem")])
    defer { config.remove() }
    let snapshot = try TrustSnapshot.compile(
      try ConfigurationParser.load(file: config.file), generation: 1, systemOverride: [])
    let engine = TrustEngine()
    func decide(_ host: String, _ chain: String) -> TrustDecision {
      guard case .rule(_, _, let policy) = snapshot.route(Fixtures.host(host)) else {
        return .rejected(.emptyChain)
      }
      return policy.evaluate(
        Fixtures.chain(chain), host: Fixtures.host(host), engine: engine, at: Fixtures.now)
    }
    XCTAssertTrue(decide("httpbin.org", "httpbin-chain.pem").isTrusted)
    XCTAssertEqual(decide("alpha.net", "adn-chain.pem").summary.prefix(25), "rejected: untrusted-chain")
  }
}
