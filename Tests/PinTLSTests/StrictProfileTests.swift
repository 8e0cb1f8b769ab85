import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// The strict certificate profile's cases (docs/TRUST.md, "Certificate profile") through PinTrust's evaluator and the real OpenSSL
/// verifier: each chain against its own anchor set, mode none, the host it
/// was made for (Tests/Fixtures/make-strict-pki.py).
final class StrictProfileTests: XCTestCase {
  func harness(_ name: String) -> PolicyHarness {
    PolicyHarness(
      registry: AnchorSetRegistry(
        sets: ["case": Fixtures.x509("strict/\(name).anchors.pem")], systemOverride: []))
  }

  func evaluate(_ name: String, policy: SecurityPolicy? = nil, at time: Date = StrictCases.now)
    -> TrustDecision
  {
    var policy = policy ?? SecurityPolicy()
    policy.anchors = ["case"]
    var harness = harness(name)
    harness.time = time
    return harness.evaluate(policy, chain: "strict/\(name).chain.pem", host: StrictCases.hosts[name])
  }

  func testEveryCaseGetsItsVerdict() {
    XCTAssertEqual(Set(StrictCases.all.map(\.name)), Set(StrictCases.hosts.keys), "table and manifest differ")
    for item in 1...10 {
      XCTAssertTrue(StrictCases.all.contains { $0.item == item }, "no case for item \(item)")
    }
    for testCase in StrictCases.all {
      if let problem = StrictCases.mismatch(evaluate(testCase.name), testCase.verdict) {
        XCTFail("\(testCase.name): \(problem)")
      }
    }
  }

  /// BR 7.1.4.3 binds publicly trusted CAs: the same CN cases under a root
  /// standing in for the system store are refused.
  func testBaselineRequirementsApplyToSystemRootsOnly() {
    for (name, verdict) in StrictCases.baselineVerdicts {
      var harness = PolicyHarness(
        registry: AnchorSetRegistry(systemOverride: Fixtures.x509("strict/\(name).anchors.pem")))
      harness.time = StrictCases.now
      let decision = harness.evaluate(
        SecurityPolicy(), chain: "strict/\(name).chain.pem", host: StrictCases.hosts[name])
      if let problem = StrictCases.mismatch(decision, verdict) { XCTFail("\(name) under system: \(problem)") }
      if let problem = StrictCases.mismatch(evaluate(name), .trusted) {
        XCTFail("\(name) under its set: \(problem)")
      }
    }
  }

  func testReasonsNameTheCertificateAndTheRule() {
    guard case .rejected(let failure) = evaluate("intermediate-basic-constraints-noncritical") else {
      return XCTFail("accepted")
    }
    XCTAssertEqual(
      failure.reason,
      "certificate at depth 1 (CN=Strict Intermediate,O=pinproxy strict tests) is malformed:"
        + " RFC 5280 §4.2.1.9: a CA certificate with a non-critical basicConstraints")
  }

  // MARK: 8. Inclusive notAfter

  func testValidityIncludesTheNotAfterInstantAndNothingAfterIt() {
    let notAfter = Fixtures.certificate("strict/validity-edge.chain.pem").notAfter
    XCTAssertEqual(notAfter, ISO8601DateFormatter().date(from: "2030-06-01T12:00:00Z"))
    XCTAssertTrue(evaluate("validity-edge", at: notAfter).isTrusted)
    XCTAssertTrue(evaluate("validity-edge", at: notAfter.addingTimeInterval(-0.001)).isTrusted)
    let after = evaluate("validity-edge", at: notAfter.addingTimeInterval(0.5))
    XCTAssertTrue(after.summary.hasPrefix("rejected: expired: certificate at depth 0"), after.summary)
  }

  // MARK: allowInvalidCertificates waives the new checks only where it waived the chain before

  func testAllowInvalidInModeNoneWaivesTheProfileAndSaysWhat() {
    let policy = SecurityPolicy(validatesDomainName: false, allowInvalidCertificates: true)
    guard case .trusted(let acceptance) = evaluate("leaf-no-authority-key-id", policy: policy) else {
      return XCTFail("refused")
    }
    XCTAssertEqual(acceptance.basis, Acceptance.Basis.invalidCertificatesAllowed)
    XCTAssertEqual(acceptance.waived?.kind, .profileViolation)
  }

  func testAllowInvalidWaivesKeyStrengthAsBefore() {
    let leaf = Fixtures.certificate("strict/leaf-rsa-1024.chain.pem")
    let pinned = SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: [leaf.spkiFingerprint], allowInvalidCertificates: true)
    XCTAssertTrue(evaluate("leaf-rsa-1024", policy: pinned).isTrusted)
    let strict = SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [leaf.spkiFingerprint])
    XCTAssertEqual(code(evaluate("leaf-rsa-1024", policy: strict)), .weakKey)
  }

  func testCertificatePinningStillEnforcesTheProfileAgainstThePins() {
    // allowInvalid skips the evaluation against the anchors, not the one
    // against the pinned certificates (AFSecurityPolicy step 5).
    let intermediate = Fixtures.certificates("strict/intermediate-no-subject-key-id.chain.pem")[1]
    let policy = SecurityPolicy(
      pinningMode: .certificate, pinnedCertificates: [intermediate], allowInvalidCertificates: true)
    // The pinned intermediate is the anchor there, and anchors are exempt from the SKI rule.
    XCTAssertTrue(evaluate("intermediate-no-subject-key-id", policy: policy).isTrusted)
    let leafPinned = SecurityPolicy(
      pinningMode: .certificate,
      pinnedCertificates: [Fixtures.certificate("strict/leaf-aia-malformed.chain.pem")],
      allowInvalidCertificates: true)
    XCTAssertEqual(code(evaluate("leaf-aia-malformed", policy: leafPinned)), .malformedCertificate)
  }

  func testPinnedSelfSignedLeafWithoutAuthorityKeyIdentifierKeepsWorking() {
    let leaf = Fixtures.certificate("strict/self-signed-leaf-no-aki.chain.pem")
    let policy = SecurityPolicy(
      pinningMode: .certificate, pinnedCertificates: [leaf], allowInvalidCertificates: true)
    let isolated = PolicyHarness(registry: AnchorSetRegistry(systemOverride: []))
    let decision = isolated.evaluate(
      policy, chain: "strict/self-signed-leaf-no-aki.chain.pem", host: "selfsigned.strict.test")
    XCTAssertTrue(decision.isTrusted, decision.summary)
  }

  // MARK: 5. A malformed name never matches, not even spelled in punycode

  func testMalformedSubjectAltNameMatchesNoHost() {
    let leaf = Fixtures.certificate("strict/san-emoji.chain.pem")
    XCTAssertEqual(leaf.dnsNames, ["\u{1F600}.strict.test"])
    for host in ["xn--ls8h.strict.test", "\u{1F600}.strict.test"] {
      XCTAssertFalse(HostnameMatcher.matches(leaf, host: Fixtures.host(host)), host)
    }
    let underscore = Fixtures.certificate("strict/san-underscore.chain.pem")
    XCTAssertFalse(HostnameMatcher.matches(underscore, host: Fixtures.host("a_b.strict.test")))
  }

  // MARK: 10. Anchor sets

  func testSystemAloneStillNeedsAChainToASelfSignedRoot() {
    // The sub-CA as a stand-in "system" store is not a trust point on its own.
    let registry = AnchorSetRegistry(systemOverride: Fixtures.x509("strict/anchor-sub-ca-only.anchors.pem"))
    let decision = PolicyHarness(registry: registry).evaluate(
      SecurityPolicy(), chain: "strict/anchor-sub-ca-only.chain.pem", host: "subca.strict.test")
    XCTAssertEqual(code(decision), .untrustedChain, decision.summary)
  }

  func testAnchorSetHoldingRootAndSubCAStillBuildsToTheRoot() {
    // A sub-CA in the set must not cut the root off the chain as built: a
    // public-key pin on the root still has to see it (AF step 6).
    let root = Fixtures.certificate("root-a.pem")
    let registry = AnchorSetRegistry(
      sets: ["national": Fixtures.x509("int-a.pem") + Fixtures.x509("root-a.pem")], systemOverride: [])
    let policy = SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: [root.spkiFingerprint], anchors: ["national"])
    let decision = PolicyHarness(registry: registry).evaluate(
      policy, chain: "httpbin-chain.pem", host: "httpbin.org")
    XCTAssertTrue(decision.isTrusted, decision.summary)
  }

  func code(_ decision: TrustDecision) -> FailureCode? {
    if case .rejected(let failure) = decision { return failure.code }
    return nil
  }
}
