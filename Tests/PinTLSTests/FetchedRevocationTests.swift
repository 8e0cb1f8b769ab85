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

  let intermediate = Fixtures.x509("revocation/intermediate.pem")[0]
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
    XCTAssertEqual(fetched.due(at: late, lead: 300), [.crl(url: url)])
  }

  func testAFailureIsRememberedForItsBackoffOnly() {
    let fetched = FetchedRevocation()
    fetched.recordFailure("crl " + url, "HTTP status 404", at: start)
    XCTAssertEqual(fetched.failure("crl " + url, at: start.addingTimeInterval(1)), "HTTP status 404")
    XCTAssertNil(
      fetched.failure("crl " + url, at: start.addingTimeInterval(FetchedRevocation.failureBackoff)))
  }
}
