import Foundation
import XCTest

@testable import PinTrust

/// `RevocationCheck`'s decisions on findings the TLS layer would report:
/// what counts, what is waived only when the rule says so, and the horizon.
final class RevocationCheckTests: XCTestCase {
  let now = Date(timeIntervalSince1970: 1_780_000_000)

  func certificate(_ cn: String, ip: [String] = [], dns: [String] = []) -> Certificate {
    .stub(subject: "CN=\(cn)", commonName: cn, dns: dns, ip: ip)
  }

  var path: [Certificate] { [certificate("leaf"), certificate("intermediate"), certificate("root")] }

  func finding(_ origin: EvidenceOrigin, _ verdict: RevocationFinding.Verdict, next: TimeInterval = 86_400)
    -> RevocationFinding
  {
    RevocationFinding(
      origin: origin, verdict: verdict, thisUpdate: now.addingTimeInterval(-3600),
      nextUpdate: now.addingTimeInterval(next))
  }

  func decide(_ evidence: PathRevocationEvidence, _ settings: RevocationSettings = .default)
    -> RevocationVerdict
  {
    RevocationCheck.evaluate(path: path, evidence: evidence, settings: settings, at: now)
  }

  func code(_ verdict: RevocationVerdict) -> String? {
    if case .refused(let failure) = verdict { return failure.code.rawValue }
    return nil
  }

  func testARevokedEntryRefusesWhateverTheSettings() {
    let entry = RevocationEntry(time: now, reason: "keyCompromise")
    let crl = PathRevocationEvidence(crls: [[], [finding(.crlFile("root.crl"), .revoked(entry))]])
    XCTAssertEqual(code(decide(crl)), "revoked")
    let staple = PathRevocationEvidence(crls: [[], []], staple: finding(.staple, .revoked(entry)))
    XCTAssertEqual(code(decide(staple)), "revoked")
    guard case .refused(let failure) = decide(crl) else { return XCTFail() }
    XCTAssertTrue(failure.reason.contains("CN=intermediate"), failure.reason)
    XCTAssertTrue(failure.reason.contains("keyCompromise"), failure.reason)
  }

  func testAStaleOrDefectiveStapleIsIgnoredUnlessRequired() {
    let stale = PathRevocationEvidence(
      crls: [[], []], staple: finding(.staple, .revoked(RevocationEntry(time: now, reason: nil)), next: -3600)
    )
    guard case .passed = decide(stale) else { return XCTFail("a stale staple counted") }
    let bad = PathRevocationEvidence(crls: [[], []], staple: .defective(.staple, "bad signature"))
    guard case .passed = decide(bad) else { return XCTFail("a bad staple counted") }
    XCTAssertEqual(code(decide(bad, RevocationSettings(stapledOCSP: .require))), "revocation-unknown")
    var mustStaple = bad
    mustStaple.mustStaple = true
    XCTAssertEqual(code(decide(mustStaple)), "revocation-unknown")
    mustStaple.staple = finding(.staple, .good)
    guard case .passed(let until, _) = decide(mustStaple) else { return XCTFail() }
    XCTAssertEqual(until, now.addingTimeInterval(86_400), "the verdict ends with the staple")
  }

  func testASuppliedCRLThatDoesNotVerifyIsNeverIgnored() {
    let evidence = PathRevocationEvidence(crls: [[.defective(.crlFile("int.crl"), "signature")], []])
    XCTAssertEqual(code(decide(evidence)), "revocation-unknown")
    let fetched = PathRevocationEvidence(crls: [
      [.defective(.distributionPoint("http://x/"), "signature")], [],
    ])
    guard case .passed = decide(fetched) else { return XCTFail("a bad fetched CRL refused under crl: off") }
  }

  func testCRLRequireAndFetching() {
    let fetch = RevocationFetch.crl(url: "http://crl.test/int.crl", issuer: [])
    let root = finding(.crlFile("root.crl"), .good)
    let wanted = PathRevocationEvidence(crls: [[], [root]], distributionPoints: [[.wanted(fetch)], []])
    XCTAssertEqual(decide(wanted, RevocationSettings(crl: .require)), .needs([fetch]))
    let failed = PathRevocationEvidence(crls: [[], []], distributionPoints: [[.failed("down")], []])
    XCTAssertEqual(code(decide(failed, RevocationSettings(crl: .require))), "revocation-unknown")
    guard case .passed(let until, _) = decide(failed, RevocationSettings(crl: .ifAvailable)) else {
      return XCTFail()
    }
    XCTAssertEqual(until, now.addingTimeInterval(RevocationCheck.missingRecheck))
    let covered = PathRevocationEvidence(
      crls: [
        [finding(.distributionPoint("http://crl.test/int.crl"), .good)], [finding(.crlFile("r"), .good)],
      ])
    guard case .passed = decide(covered, RevocationSettings(crl: .require)) else { return XCTFail() }
  }

  func testOCSPHardAndSoftFail() {
    let down = PathRevocationEvidence(crls: [[], []], responder: .pending(.failed("refused")))
    XCTAssertEqual(code(decide(down, RevocationSettings(ocsp: .hardFail))), "revocation-unknown")
    guard case .passed(_, let soft) = decide(down, RevocationSettings(ocsp: .softFail)) else {
      return XCTFail()
    }
    XCTAssertEqual(soft, "refused")
    let unknown = PathRevocationEvidence(
      crls: [[], []], responder: .answer(finding(.responder("u"), .unknown)))
    XCTAssertEqual(code(decide(unknown, RevocationSettings(ocsp: .hardFail))), "revocation-unknown")
    let good = PathRevocationEvidence(crls: [[], []], responder: .answer(finding(.responder("u"), .good)))
    guard case .passed(_, nil) = decide(good, RevocationSettings(ocsp: .hardFail)) else { return XCTFail() }
    // A good staple answers for the responder.
    let stapled = PathRevocationEvidence(
      crls: [[], []], staple: finding(.staple, .good), responder: .pending(.failed("refused")))
    guard case .passed(_, nil) = decide(stapled, RevocationSettings(ocsp: .hardFail)) else {
      return XCTFail()
    }
  }

  /// Evidence at hand counts: a held answer saying revoked refuses though
  /// the server stapled a good one.
  func testAHeldRevokedAnswerRefusesBesideAGoodStaple() {
    let entry = RevocationEntry(time: now, reason: "keyCompromise")
    let evidence = PathRevocationEvidence(
      crls: [[], []], staple: finding(.staple, .good),
      responder: .answer(finding(.responder("u"), .revoked(entry))))
    XCTAssertEqual(code(decide(evidence, RevocationSettings(ocsp: .softFail))), "revoked")
  }

  /// A path that did not verify (allowInvalidCertificates) has no anchor:
  /// its last certificate is examined too.
  func testAnUnanchoredPathExaminesItsLastCertificate() {
    let leafOnly = [certificate("leaf")]
    let evidence = PathRevocationEvidence(crls: [[]], distributionPoints: [[.failed("not fetched")]])
    let anchored = RevocationCheck.evaluate(
      path: leafOnly, evidence: evidence, settings: RevocationSettings(crl: .require), at: now)
    guard case .passed = anchored else { return XCTFail("an anchor was examined") }
    let unanchored = RevocationCheck.evaluate(
      path: leafOnly, evidence: evidence, settings: RevocationSettings(crl: .require), anchored: false,
      at: now)
    XCTAssertEqual(code(unanchored), "revocation-unknown")
  }

  func testDatesWithinTheSkewOnly() {
    let future = RevocationFinding(
      origin: .crlFile("f"), verdict: .good, thisUpdate: now.addingTimeInterval(RevocationCheck.skew + 60),
      nextUpdate: now.addingTimeInterval(86_400))
    XCTAssertEqual(code(decide(PathRevocationEvidence(crls: [[future], []]))), "revocation-unknown")
    let justPast = finding(.crlFile("f"), .good, next: -(RevocationCheck.skew - 60))
    guard case .passed = decide(PathRevocationEvidence(crls: [[justPast], []])) else { return XCTFail() }
  }

  /// BR 7.1.4.3 decides a hexadecimal IPv4 CN as it decides a dotted one.
  func testAHexadecimalIPv4CommonNameMustRepeatASubjectAltName() {
    let hex = certificate("0x7f000001", ip: ["127.0.0.1"])
    XCTAssertNotNil(ProfileRules.commonNameViolation(hex))
    XCTAssertNil(ProfileRules.violation(of: hex, depth: 0, isAnchor: false, baselineRequirements: false))
    XCTAssertNil(ProfileRules.commonNameViolation(certificate("127.0.0.1", ip: ["127.0.0.1"])))
  }
}
