import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// Scenarios beyond AFNetworking's suite, against the real OpenSSL verifier.
final class PolicyScenarioTests: XCTestCase {
  lazy var harness = PolicyHarness()

  func code(_ decision: TrustDecision) -> FailureCode? {
    if case .rejected(let failure) = decision { return failure.code }
    return nil
  }

  func publicKeyPolicy(_ pins: [Digest256], allowInvalid: Bool = false) -> SecurityPolicy {
    SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: pins, allowInvalidCertificates: allowInvalid)
  }

  // MARK: Chains

  func testCrossSignedRootCopyHasAnotherHashButTheSameKey() {
    let root = Fixtures.certificate("root-a.pem")
    let cross = Fixtures.certificate("root-a-cross.pem")
    XCTAssertNotEqual(root.fingerprint, cross.fingerprint)
    XCTAssertEqual(root.spkiFingerprint, cross.spkiFingerprint)
  }

  func testCrossSignedRootSentInChainStillBuildsToTheAnchorAndMatchesItsKey() {
    let root = Fixtures.certificate("root-a.pem")
    let decision = harness.evaluate(
      publicKeyPolicy([root.spkiFingerprint]), chain: "httpbin-cross-chain.pem", host: "httpbin.org")
    XCTAssertTrue(decision.isTrusted, decision.summary)
  }

  func testPinnedCrossSignedCopyIsATrustPointInCertificateMode() {
    let policy = SecurityPolicy(
      pinningMode: .certificate, pinnedCertificates: [Fixtures.certificate("root-a-cross.pem")])
    let decision = harness.evaluate(policy, chain: "httpbin-cross-chain.pem", host: "httpbin.org")
    XCTAssertTrue(decision.isTrusted, decision.summary)
  }

  func testPinnedRootTheServerDidNotSendMatchesInBothModes() {
    let root = Fixtures.certificate("root-a.pem")
    XCTAssertFalse(Fixtures.chain("httpbin-chain.pem").certificates.contains(root.der))
    for policy in [
      SecurityPolicy(pinningMode: .certificate, pinnedCertificates: [root]),
      publicKeyPolicy([root.spkiFingerprint]),
    ] {
      let decision = harness.evaluate(policy, chain: "httpbin-chain.pem", host: "httpbin.org")
      XCTAssertTrue(decision.isTrusted, "\(policy.pinningMode): \(decision.summary)")
    }
  }

  func testPinnedIntermediateAloneIsEnoughWithoutTheSystemRootInCertificateMode() {
    // The policy's anchors know neither root: only the pinned intermediate makes the chain.
    let policy = SecurityPolicy(
      pinningMode: .certificate, pinnedCertificates: [Fixtures.certificate("int-a.pem")],
      allowInvalidCertificates: true)
    let isolated = PolicyHarness(registry: AnchorSetRegistry(systemOverride: []))
    let decision = isolated.evaluate(policy, chain: "httpbin-chain.pem", host: "httpbin.org")
    XCTAssertTrue(decision.isTrusted, decision.summary)
  }

  func testExpiredChainIsRejectedAsExpired() {
    let decision = harness.evaluate(.default, chain: "expired-chain.pem", host: "expired.httpbin.org")
    XCTAssertEqual(code(decision), .expired)
    guard case .rejected(let failure) = decision else { return }
    XCTAssertTrue(failure.reason.contains("depth 0"), failure.reason)
  }

  func testNotYetValidChainIsRejectedAsExpired() {
    let decision = harness.evaluate(.default, chain: "future-chain.pem", host: "future.httpbin.org")
    XCTAssertEqual(code(decision), .expired)
  }

  func testExpiredChainIsRejectedEvenWhenCertificatePinnedWithAllowInvalid() {
    // allowInvalid does not skip the second evaluation against the pins.
    let policy = SecurityPolicy(
      pinningMode: .certificate, pinnedCertificates: [Fixtures.certificate("int-a.pem")],
      allowInvalidCertificates: true)
    XCTAssertEqual(
      code(harness.evaluate(policy, chain: "expired-chain.pem", host: "expired.httpbin.org")), .expired)
  }

  func testExpiredChainIsAcceptedByPublicKeyPinWithAllowInvalidAndSaysWhatWasWaived() {
    let pin = Fixtures.certificate("int-a.pem").spkiFingerprint
    let decision = harness.evaluate(
      publicKeyPolicy([pin], allowInvalid: true), chain: "expired-chain.pem", host: "expired.httpbin.org")
    guard case .trusted(let acceptance) = decision else { return XCTFail(decision.summary) }
    XCTAssertEqual(acceptance.basis, .pinnedPublicKey(pin))
    XCTAssertEqual(acceptance.waived?.kind, .expired)
  }

  func testLeafWithoutServerAuthUsageFailsServerPolicyButPassesBasicX509() {
    XCTAssertEqual(
      code(harness.evaluate(.default, chain: "client-only-chain.pem", host: "client.httpbin.org")),
      .untrustedChain)
    var basic = SecurityPolicy.default
    basic.validatesDomainName = false
    XCTAssertTrue(
      harness.evaluate(basic, chain: "client-only-chain.pem", host: "client.httpbin.org").isTrusted)
  }

  func testECDSALeafValidatesAndPinsByItsOwnKey() {
    let leaf = Fixtures.certificate("ecdsa.pem")
    XCTAssertEqual(leaf.publicKey, PublicKeyDescription(algorithm: .ec, bits: 256, curve: "P-256"))
    let decision = harness.evaluate(
      publicKeyPolicy([leaf.spkiFingerprint]), chain: "ecdsa-chain.pem", host: "ecdsa.httpbin.org")
    XCTAssertTrue(decision.isTrusted, decision.summary)
  }

  func testForgedLeafNamingThePinnedCAIsNotAcceptedByThatCAsKey() {
    // allowInvalid makes the pin the only check; the forged leaf names int-a
    // as its issuer but int-a never signed it, so int-a's key must not count.
    let pin = Fixtures.certificate("int-a.pem").spkiFingerprint
    let decision = harness.evaluate(
      publicKeyPolicy([pin], allowInvalid: true), chain: "forged-chain.pem", host: nil)
    XCTAssertEqual(code(decision), .pinMismatch, decision.summary)
  }

  func testForgedLeafFailsTheChainWithABadSignature() {
    let decision = harness.evaluate(.default, chain: "forged-chain.pem", host: "httpbin.org")
    guard case .rejected(.chainInvalid(let failure, _)) = decision else { return XCTFail(decision.summary) }
    XCTAssertEqual(failure.kind, .badSignature)
  }

  func testPinMismatchReasonListsExpectedAndSeenPins() {
    let wrong = Fixtures.certificate("adn.pem").spkiFingerprint
    guard
      case .rejected(let failure) = harness.evaluate(
        publicKeyPolicy([wrong]), chain: "httpbin-chain.pem", host: "httpbin.org")
    else { return XCTFail("expected a rejection") }
    XCTAssertEqual(failure.code, .pinMismatch)
    XCTAssertTrue(failure.reason.contains(SPKIPin.format(wrong)), failure.reason)
    XCTAssertTrue(failure.reason.contains(Fixtures.certificate("httpbin.pem").spkiPin), failure.reason)
    XCTAssertTrue(failure.reason.contains("CN=httpbin.org"), failure.reason)
  }

  func testUnparsableChainIsRefusedEvenWhenInvalidCertificatesAreAllowed() {
    let garbage = PresentedChain([Array("not a certificate".utf8)])
    var none = SecurityPolicy.default
    none.allowInvalidCertificates = true
    none.validatesDomainName = false
    let pin = Fixtures.certificate("httpbin.pem").spkiFingerprint
    for policy in [none, publicKeyPolicy([pin], allowInvalid: true)] {
      let decision = harness.evaluate(policy, chain: garbage, host: nil)
      XCTAssertEqual(code(decision), .untrustedChain, "\(policy.pinningMode): \(decision.summary)")
    }
  }

  // MARK: Hosts

  func testWildcardCoversExactlyOneLabel() {
    XCTAssertTrue(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "www.httpbin.org").isTrusted)
    XCTAssertEqual(
      code(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "a.b.httpbin.org")), .hostnameMismatch
    )
    XCTAssertEqual(
      code(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "httpbin.org.evil.com")),
      .hostnameMismatch)
  }

  func testHostLetterCaseAndTrailingDotDoNotMatter() {
    XCTAssertTrue(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "HTTPBin.ORG").isTrusted)
    XCTAssertTrue(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "Www.HttpBin.org.").isTrusted)
  }

  func testIPHostsMatchIPAddressEntriesOnly() {
    XCTAssertTrue(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "127.0.0.1").isTrusted)
    XCTAssertTrue(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "[::1]").isTrusted)
    XCTAssertTrue(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "0:0::1").isTrusted)
    XCTAssertEqual(
      code(harness.evaluate(.default, chain: "httpbin-chain.pem", host: "127.0.0.2")), .hostnameMismatch)
    XCTAssertEqual(
      code(harness.evaluate(.default, chain: "adn-chain.pem", host: "127.0.0.1")), .hostnameMismatch)
  }

  func testCommonNameIsNotConsultedWhenThereIsNoSubjectAltName() {
    // foobar-cn.pem has CN=foobar.com and no SAN; pinned as the only anchor
    // the chain is valid, but the host check still fails.
    let policy = SecurityPolicy(
      pinningMode: .certificate, pinnedCertificates: [Fixtures.certificate("foobar-cn.pem")])
    let isolated = PolicyHarness(
      registry: AnchorSetRegistry(sets: [:], systemOverride: Fixtures.x509("foobar-cn.pem")))
    XCTAssertEqual(
      code(isolated.evaluate(policy, chain: "foobar-cn.pem", host: "foobar.com")), .hostnameMismatch)
    XCTAssertTrue(
      isolated.evaluate(policy, chain: "altname.pem", host: "foobar.com").summary.hasPrefix("rejected"))
  }

  // MARK: Empty pin sets and anchor sets

  func testEmptyPinSetRejectsInEachPinningMode() {
    for mode in [PinningMode.certificate, .publicKey] {
      let decision = harness.evaluate(
        SecurityPolicy(pinningMode: mode), chain: "httpbin-chain.pem", host: "httpbin.org")
      XCTAssertEqual(code(decision), .noPins, "\(mode)")
    }
  }

  func testNamedAnchorSetReplacesOrJoinsTheSystemStore() {
    let registry = AnchorSetRegistry(
      sets: ["national": Fixtures.x509("root-a.pem")], systemOverride: Fixtures.x509("root-b.pem"))
    let local = PolicyHarness(registry: registry)
    var policy = SecurityPolicy.default
    XCTAssertEqual(
      code(local.evaluate(policy, chain: "httpbin-chain.pem", host: "httpbin.org")), .untrustedChain)
    policy.anchors = ["system", "national"]
    XCTAssertTrue(local.evaluate(policy, chain: "httpbin-chain.pem", host: "httpbin.org").isTrusted)
    XCTAssertTrue(local.evaluate(policy, chain: "adn-chain.pem", host: "alpha.net").isTrusted)
    policy.anchors = ["national"]
    XCTAssertTrue(local.evaluate(policy, chain: "httpbin-chain.pem", host: "httpbin.org").isTrusted)
    XCTAssertEqual(code(local.evaluate(policy, chain: "adn-chain.pem", host: "alpha.net")), .untrustedChain)
  }

  func testUnknownAnchorSetIsAnErrorNamingIt() {
    let registry = AnchorSetRegistry(sets: ["national": []])
    XCTAssertThrowsError(try registry.store(for: ["system", "nationl"])) { error in
      XCTAssertTrue("\(error)".contains("\"nationl\""), "\(error)")
      XCTAssertTrue("\(error)".contains("national"), "\(error)")
    }
  }

  func testAnchorStoreIsBuiltOncePerUnion() throws {
    let registry = Fixtures.registry(sets: ["national": Fixtures.x509("root-a.pem")])
    let first = try registry.store(for: ["system", "national"])
    let second = try registry.store(for: ["national", "system", "national"])
    XCTAssertTrue(first === second)
  }
}
