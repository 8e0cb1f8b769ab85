import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// What the daemon keeps of fetched CRLs: a refresh that does not verify
/// keeps the CRL held, every CRL stored moves the generation that keys the
/// fingerprint cache, and what is due again before its nextUpdate.
final class FetchedRevocationTests: XCTestCase {
  func crl(_ name: String) throws -> CertificateRevocationList {
    try CertificateRevocationList(
      bytes: [UInt8](Data(contentsOf: URL(fileURLWithPath: Fixtures.path("revocation/" + name)))))
  }

  lazy var intermediate = Fixtures.x509("revocation/intermediate.pem")[0]
  let url = "http://crl.revocation.test/intermediate.crl"
  let start = Date(timeIntervalSince1970: 1_780_000_000)

  func testARefreshThatDoesNotVerifyKeepsTheCRLHeld() throws {
    let fetched = FetchedRevocation()
    let held = try crl("intermediate.crl")
    XCTAssertNil(held.check(signedBy: intermediate))
    let before = fetched.generation
    XCTAssertNil(fetched.store(held, from: url, at: start))
    XCTAssertGreaterThan(fetched.generation, before)
    let refused = fetched.store(try crl("intermediate-wrongkey.crl"), from: url, at: start)
    XCTAssertEqual(refused, "its signature does not verify under the issuer's key")
    XCTAssertTrue(fetched.crl(at: url)?.crl === held)
    XCTAssertNotNil(
      fetched.store(try crl("intermediate-nonumber.crl"), from: url, at: start), "a defect refuses")
    XCTAssertNotNil(fetched.store(try crl("intermediate-expired.crl"), from: url, at: start), "older refuses")
    XCTAssertTrue(fetched.crl(at: url)?.crl === held)
  }

  func testACRLIsDueInTheLastTenthOfItsValidity() throws {
    let fetched = FetchedRevocation()
    fetched.store(try crl("intermediate.crl"), from: url, at: start)
    // Valid 2026-01-01 to 2035-01-01: due about ten months before the end.
    XCTAssertEqual(fetched.due(at: start, lead: 300), [])
    let late = ISO8601Instant.parse("2034-06-01T00:00:00Z")!
    XCTAssertEqual(fetched.due(at: late, lead: 300).map(\.url), [url])
  }

  func answer(_ name: String) throws -> (der: [UInt8], finding: RevocationFinding) {
    let der = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("revocation/" + name))))
    let leaf = Fixtures.x509("revocation/good.pem")[0]
    return (
      der,
      OCSPResponseCheck.finding(der, leaf: leaf, issuer: intermediate, origin: .responder("u"), at: start)
    )
  }

  /// A fetched OCSP answer replaces the one held only when it is as new,
  /// and a "good" never replaces a revocation.
  func testAnOCSPAnswerHeldIsReplacedOnlyByANewerOneAndNeverGoodOverRevoked() throws {
    let fetched = FetchedRevocation()
    let leaf = Fixtures.x509("revocation/good.pem")[0]
    let request = try XCTUnwrap(OCSPResponseCheck.request(leaf: leaf, issuer: intermediate))
    let fetch = RevocationFetch.ocsp(
      url: "http://ocsp.revocation.test/", request: request.der, certID: request.certID, leaf: leaf.der,
      issuer: intermediate.der)
    let good = try answer("ocsp-good.der")
    XCTAssertNil(fetched.store(answer: good.der, finding: good.finding, for: fetch, at: start))
    let older = try answer("ocsp-expired.der")
    XCTAssertEqual(
      fetched.store(answer: older.der, finding: older.finding, for: fetch, at: start),
      "it is older than the answer held")
    let wrong = try answer("ocsp-wrong-signer.der")
    XCTAssertNotNil(fetched.store(answer: wrong.der, finding: wrong.finding, for: fetch, at: start))
    let revoked = try answer("ocsp-revoked-for-good.der")
    XCTAssertNil(fetched.store(answer: revoked.der, finding: revoked.finding, for: fetch, at: start))
    XCTAssertEqual(
      fetched.store(answer: good.der, finding: good.finding, for: fetch, at: start),
      "the answer held says revoked")
    XCTAssertEqual(fetched.answer(for: request.certID)?.der, revoked.der)
  }

  /// A CRL fetched after a verdict was cached is in force for the next
  /// evaluation: its generation keys the fingerprint cache.
  func testAFetchedCRLRevokesACachedVerdictOnTheNextEvaluation() throws {
    let fetched = FetchedRevocation()
    var policy = SecurityPolicy(anchors: ["rev"])
    policy.revocation = RevocationSettings(crl: .ifAvailable)
    let compiled = try CompiledPolicy(
      policy: policy, identity: PolicyIdentity(generation: 1, rule: .domain(0)),
      registry: AnchorSetRegistry(sets: ["rev": Fixtures.x509("revocation/root.pem")]), fetched: fetched)
    let engine = TrustEngine()
    let chain = PresentedChain(Fixtures.x509("revocation/revoked-chain.pem").map(\.der))
    let host = TrustHost("revoked.revocation.test")
    fetched.store(try crl("intermediate-empty.crl"), from: url, at: start)
    let first = compiled.evaluate(chain, host: host, engine: engine, at: start)
    XCTAssertTrue(first.isTrusted, first.summary)
    XCTAssertEqual(engine.cache.count, 1)
    XCTAssertNil(fetched.store(try crl("intermediate.crl"), from: url, at: start))
    let second = compiled.evaluate(chain, host: host, engine: engine, at: start.addingTimeInterval(1))
    XCTAssertEqual(second.summary.split(separator: ":").first, "rejected")
    XCTAssertTrue(second.summary.contains("rejected: revoked: "), second.summary)
  }

  func testAFailureIsRememberedForItsBackoffOnly() {
    let fetched = FetchedRevocation()
    fetched.recordFailure("crl " + url, "HTTP status 404", at: start)
    XCTAssertEqual(fetched.failure("crl " + url, at: start.addingTimeInterval(1)), "HTTP status 404")
    XCTAssertNil(
      fetched.failure("crl " + url, at: start.addingTimeInterval(FetchedRevocation.failureBackoff)))
  }
}
