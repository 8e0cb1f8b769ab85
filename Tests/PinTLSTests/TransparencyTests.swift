import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// Certificate transparency with the real OpenSSL: SCTs signed by the test
/// logs of Tests/Fixtures/make-ct-fixtures.py, validated against the test log
/// list, counted by `TransparencyCheck`.
final class TransparencyTests: XCTestCase {
  var logs: CTLogStore!

  override func setUpWithError() throws {
    logs = try CTLogStore(file: SCTFixtures.logList, minimumSCTs: 2)
  }

  func policy(anchors: [String] = ["root-a.pem"]) throws -> CompiledPolicy {
    let sets = ["test": anchors.flatMap { Fixtures.x509($0) }]
    return try CompiledPolicy(
      policy: SecurityPolicy(anchors: ["test"]), identity: PolicyIdentity(generation: 1, rule: .domain(0)),
      registry: Fixtures.registry(sets: sets))
  }

  /// The shortfall for the httpbin chain with these SCTs in the TLS extension.
  func check(
    _ scts: [[UInt8]], chain: String = "httpbin-chain.pem", at time: Date = Fixtures.now,
    logs: CTLogStore? = nil
  ) throws -> TransparencyShortfall? {
    let lists = scts.isEmpty ? [] : [SCTFixtures.list(scts)]
    let failure = try policy().transparencyFailure(
      Fixtures.x509(chain), evidence: .lists(lists), logs: logs ?? self.logs, at: time)
    guard let failure else { return nil }
    guard case .certificateTransparency(let shortfall) = failure else {
      XCTFail("not a CT failure: \(failure)")
      return nil
    }
    XCTAssertEqual(failure.code, .ctRequired)
    return shortfall
  }

  func testTheListLoadsTheUsableQualifiedAndRetiredLogsOnly() {
    let names = logs.list.entries.map(\.log.description).sorted()
    XCTAssertEqual(names, ["Pinproxy Test Log A", "Pinproxy Test Log B", "Pinproxy Test Log Retired"])
    XCTAssertEqual(logs.list.skipped, 1)  // pending
  }

  /// The default list is Apple's (ATS semantics: Chrome's list may not be
  /// used for enforcement outside Chrome). Apple's file carries fields of
  /// its own (`$schema`, `assetVersion`, a log's `log_type`, tiled logs
  /// with submission and monitoring URLs instead of `url`): the same logs load.
  func testAListShapedLikeApplesLoadsTheSameLogs() throws {
    let data = try Data(contentsOf: URL(fileURLWithPath: SCTFixtures.logList))
    var document = try XCTUnwrap(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    document["$schema"] = "https://valid.apple.com/ct/log_list/schema_versions/log_list_schema_v5.json"
    document["assetVersion"] = 1234
    var operators = try XCTUnwrap(document["operators"] as? [[String: Any]])
    var logs = try XCTUnwrap(operators[0]["logs"] as? [[String: Any]])
    var tiled = logs.removeFirst()
    tiled["submission_url"] = tiled.removeValue(forKey: "url")
    tiled["monitoring_url"] = "https://ct.invalid/a/tiles/"
    logs = logs.map { log in log.merging(["log_type": "prod"]) { $1 } }
    operators[0]["logs"] = logs
    operators[0]["tiled_logs"] = [tiled]
    document["operators"] = operators
    let apple = try CTLogList(json: Array(try JSONSerialization.data(withJSONObject: document)))
    XCTAssertEqual(
      apple.entries.map(\.log.description).sorted(), self.logs.list.entries.map(\.log.description).sorted())
    XCTAssertEqual(apple.skipped, self.logs.list.skipped)
  }

  func testTwoValidSCTsFromDistinctLogsAreEnough() throws {
    XCTAssertNil(try check([SCTFixtures.sct("a"), SCTFixtures.sct("b")]))
  }

  func testNoSCTAtAllIsRefusedAndSaysSo() throws {
    let shortfall = try XCTUnwrap(try check([]))
    XCTAssertEqual(shortfall.counted, [])
    XCTAssertTrue(shortfall.reason.contains("found 0: the server presented no SCT"), shortfall.reason)
  }

  func testOneValidSCTIsTooFewAndTheReasonNamesItsLog() throws {
    let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a")]))
    XCTAssertEqual(shortfall.counted.map(\.description), ["Pinproxy Test Log A"])
    XCTAssertTrue(
      shortfall.reason.contains("at least 2 distinct known logs; found 1 (\"Pinproxy Test Log A\")"),
      shortfall.reason)
  }

  func testAMinimumOfOneAcceptsOneValidSCT() throws {
    let one = try CTLogStore(file: SCTFixtures.logList, minimumSCTs: 1)
    XCTAssertNil(try check([SCTFixtures.sct("a")], logs: one))
  }

  func testAnSCTFromAnUnknownLogDoesNotCount() throws {
    let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a"), SCTFixtures.sct("unknown")]))
    XCTAssertEqual(shortfall.counted.count, 1)
    XCTAssertEqual(shortfall.notCounted.map(\.observation.status), [.unknownLog])
    XCTAssertTrue(shortfall.reason.contains("from a log not in the log list"), shortfall.reason)
  }

  func testAPendingLogIsNotTrusted() throws {
    let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a"), SCTFixtures.sct("pending")]))
    XCTAssertEqual(shortfall.notCounted.map(\.observation.status), [.unknownLog])
  }

  func testABadSignatureDoesNotCount() throws {
    let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a"), SCTFixtures.tampered("b")]))
    XCTAssertEqual(shortfall.notCounted.map(\.observation.status), [.invalid])
    XCTAssertTrue(
      shortfall.reason.contains(
        "SCT from \"Pinproxy Test Log B\" (TLS extension): its signature does not verify"),
      shortfall.reason)
  }

  func testTwoSCTsFromOneLogCountOnce() throws {
    let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a"), SCTFixtures.sct("a")]))
    XCTAssertEqual(shortfall.counted.count, 1)
  }

  func testAnSCTOverAnotherCertificateDoesNotVerify() throws {
    // The SCTs sign the httpbin leaf; the adn leaf presents them.
    let shortfall = try XCTUnwrap(
      try check([SCTFixtures.sct("a"), SCTFixtures.sct("b")], chain: "adn-chain.pem"))
    XCTAssertEqual(shortfall.notCounted.map(\.observation.status), [.invalid, .invalid])
  }

  func testARetiredLogCountsOnlyForEmbeddedSCTsIssuedBeforeItRetired() throws {
    // Embedded in the certificate before the retirement: counts.
    XCTAssertNil(
      try policy().transparencyFailure(
        Fixtures.x509("ct/embedded-a-retired-chain.pem"), evidence: .lists([]), logs: logs, at: Fixtures.now))
    // In the TLS extension, early or late: anyone holding the key could have made it.
    for name in ["retired-early", "retired-late"] {
      let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a"), SCTFixtures.sct(name)]))
      XCTAssertTrue(
        shortfall.reason.contains(
          "the log is retired; only SCTs embedded in a certificate before its retirement count"),
        shortfall.reason)
    }
  }

  func testAnSCTFromTheFutureIsInvalid() throws {
    // Issued 2026-01-15; evaluated a month earlier.
    let before = Date(timeIntervalSince1970: 1_765_584_000)  // 2025-12-13
    let shortfall = try XCTUnwrap(try check([SCTFixtures.sct("a"), SCTFixtures.sct("b")], at: before))
    XCTAssertEqual(shortfall.counted, [])
  }

  func testEmbeddedSCTsCountAndCombineWithTheTLSExtension() throws {
    let policy = try policy()
    let both = Fixtures.x509("ct/embedded-ab-chain.pem")
    XCTAssertNil(policy.transparencyFailure(both, evidence: .lists([]), logs: logs, at: Fixtures.now))
    let one = Fixtures.x509("ct/embedded-a-chain.pem")
    let failure = try XCTUnwrap(
      policy.transparencyFailure(one, evidence: .lists([]), logs: logs, at: Fixtures.now))
    XCTAssertEqual(failure.code, .ctRequired)
    XCTAssertTrue(failure.reason.contains("found 1 (\"Pinproxy Test Log A\")"), failure.reason)
    // Log B's SCT over the httpbin leaf does not cover this leaf.
    let mixed = policy.transparencyFailure(
      one, evidence: .lists([SCTFixtures.list([SCTFixtures.sct("b")])]), logs: logs, at: Fixtures.now)
    XCTAssertEqual(mixed?.code, .ctRequired)
  }

  func testAnEmbeddedSCTNeedsTheIssuerFromTheChainAsBuilt() throws {
    // The leaf alone, and anchors that do not include its issuer: the
    // precertificate's issuer key hash cannot be checked.
    let leafOnly = Fixtures.x509("ct/embedded-ab.pem")
    let failure = try XCTUnwrap(
      try policy().transparencyFailure(leafOnly, evidence: .lists([]), logs: logs, at: Fixtures.now))
    guard case .certificateTransparency(let shortfall) = failure else { return XCTFail("\(failure)") }
    XCTAssertEqual(shortfall.notCounted.map(\.observation.status), [.unverified, .unverified])
    // With the intermediate among the anchors, the chain as built supplies it.
    XCTAssertNil(
      try policy(anchors: ["root-a.pem", "int-a.pem"]).transparencyFailure(
        leafOnly, evidence: .lists([]), logs: logs, at: Fixtures.now))
  }

  func testTheIssuerMayBeAPresentedCertificateOutsideTheAnchors() throws {
    // A rule pinned to certificates may trust an issuer that no anchor set
    // holds: the presented intermediate verifies the leaf's signature.
    let chain = Fixtures.x509("ct/embedded-ab-chain.pem")
    XCTAssertNil(
      try policy(anchors: ["root-b.pem"]).transparencyFailure(
        chain, evidence: .lists([]), logs: logs, at: Fixtures.now))
    // A presented certificate that merely names the issuer is not used.
    let forged = [chain[0], Fixtures.x509("int-b.pem")[0]]
    XCTAssertNotNil(
      try policy(anchors: ["root-b.pem"]).transparencyFailure(
        forged, evidence: .lists([]), logs: logs, at: Fixtures.now))
  }

  func testAVerifiedSCTIsRememberedOnlyForItsCertificateAndTime() throws {
    let two = [SCTFixtures.sct("a"), SCTFixtures.sct("b")]
    XCTAssertNil(try check(two))
    XCTAssertNil(try check(two))  // from the verified set
    // The same SCTs for another certificate, altered, or from before they were issued: not remembered.
    XCTAssertNotNil(try check(two, chain: "adn-chain.pem"))
    XCTAssertNotNil(try check([SCTFixtures.sct("a"), SCTFixtures.tampered("b")]))
    XCTAssertNotNil(try check(two, at: Date(timeIntervalSince1970: 1_765_584_000)))
    XCTAssertNil(try check(two))
  }

  func testAListWhoseLogIDIsNotTheKeyHashIsRefused() throws {
    var text = try String(contentsOfFile: SCTFixtures.logList, encoding: .utf8)
    let json = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
    let operators = json["operators"] as! [[String: Any]]
    let firstID = (operators[0]["logs"] as! [[String: Any]])[0]["log_id"] as! String
    let otherID = (operators[1]["logs"] as! [[String: Any]])[0]["log_id"] as! String
    text = text.replacingOccurrences(of: firstID, with: otherID)
    XCTAssertThrowsError(try CTLogList(json: Array(text.utf8))) { error in
      XCTAssertTrue("\(error)".contains("log_id is not the SHA-256 of its key"), "\(error)")
    }
    XCTAssertThrowsError(try CTLogList(json: Array("{\"logs\": []}".utf8)))
  }

  func testServerInfoFilesAreReadAsTheListTheyCarry() throws {
    let directory = NSTemporaryDirectory()
    let scts = [SCTFixtures.sct("a"), SCTFixtures.sct("b")]
    let pem = try SCTFixtures.write(
      Array(SCTFixtures.serverInfo(scts).utf8), named: "info-\(UUID().uuidString).pem", in: directory)
    XCTAssertEqual(try SCTListFile.load(pem), SCTFixtures.list(scts))
    let raw = try SCTFixtures.write(
      SCTFixtures.list(scts), named: "raw-\(UUID().uuidString).bin", in: directory)
    XCTAssertEqual(try SCTListFile.load(raw), SCTFixtures.list(scts))
  }
}
