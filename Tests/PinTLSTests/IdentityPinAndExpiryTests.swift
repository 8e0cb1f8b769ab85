import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// ATS pinned identities (`pinnedLeafPublicKeyHashes`,
/// `pinnedCAPublicKeyHashes`) and `pinsExpire`, through `RuleEvaluator` with
/// the real chain verifier and the test PKI (httpbin: leaf ← int-a ← root-a).
final class IdentityPinAndExpiryTests: XCTestCase {
  lazy var harness = PolicyHarness()
  lazy var leaf = Fixtures.certificate("httpbin.pem").spkiFingerprint
  lazy var intermediateA = Fixtures.certificate("int-a.pem").spkiFingerprint
  lazy var rootA = Fixtures.certificate("root-a.pem").spkiFingerprint
  lazy var rootB = Fixtures.certificate("root-b.pem").spkiFingerprint
  lazy var other = Fixtures.certificate("adn.pem").spkiFingerprint

  func decide(
    _ policy: SecurityPolicy, chain: String = "httpbin-chain.pem", host: String? = "httpbin.org",
    at time: Date = Fixtures.now
  ) -> TrustDecision {
    RuleEvaluator.evaluate(
      Fixtures.chain(chain), host: host.map(Fixtures.host), policy: policy, dynamicPins: nil,
      verifier: harness.compile(policy), at: time)
  }

  func identities(leaf: [Digest256] = [], ca: [Digest256] = []) -> SecurityPolicy {
    SecurityPolicy(pinnedLeafPublicKeyHashes: leaf, pinnedCAPublicKeyHashes: ca)
  }

  func failure(_ decision: TrustDecision) -> TrustFailure? {
    if case .rejected(let failure) = decision { return failure }
    return nil
  }

  // MARK: Identities

  func testTheLeafListMustHoldTheLeafsKey() {
    XCTAssertTrue(decide(identities(leaf: [other, leaf])).isTrusted)
    let refused = failure(decide(identities(leaf: [other])))
    XCTAssertEqual(refused?.code, .pinMismatch)
    XCTAssertTrue(refused?.reason.contains("not in pinnedLeafPublicKeyHashes") == true, refused?.reason ?? "")
  }

  func testALeafKeyIsNotACAIdentity() {
    // The CA list looks only above the leaf.
    let refused = failure(decide(identities(ca: [leaf])))
    XCTAssertEqual(refused?.code, .pinMismatch)
    XCTAssertTrue(
      refused?.reason.contains(
        "above the leaf in the chain as built has a public key in pinnedCAPublicKeyHashes")
        == true, refused?.reason ?? "")
  }

  func testTheCAListMatchesTheIntermediateOrTheRootAsBuilt() {
    XCTAssertTrue(decide(identities(ca: [intermediateA])).isTrusted)
    // The server does not send root A; the chain as built includes it.
    XCTAssertTrue(decide(identities(ca: [rootA])).isTrusted)
    XCTAssertEqual(failure(decide(identities(ca: [rootB])))?.code, .pinMismatch)
  }

  func testBothListsMustMatchWhenBothAreGiven() {
    XCTAssertTrue(decide(identities(leaf: [leaf], ca: [rootA])).isTrusted)
    XCTAssertEqual(failure(decide(identities(leaf: [leaf], ca: [rootB])))?.code, .pinMismatch)
    XCTAssertEqual(failure(decide(identities(leaf: [other], ca: [rootA])))?.code, .pinMismatch)
  }

  func testIdentitiesOnlyTighten() {
    // The chain must still be valid: an expired leaf with a matching key is refused as expired.
    let expired = Fixtures.certificate("expired.pem").spkiFingerprint
    XCTAssertEqual(
      failure(decide(identities(leaf: [expired]), chain: "expired-chain.pem", host: "expired.httpbin.org"))?
        .code,
      .expired)
    // And they apply beside a pin mode: publicKey pins match, the CA list does not.
    var both = identities(ca: [rootB])
    both.pinningMode = .publicKey
    both.pinnedPublicKeyHashes = [leaf]
    XCTAssertEqual(failure(decide(both))?.code, .pinMismatch)
  }

  func testAForgedChainCannotBorrowAPinnedCAsKey() {
    // forged-chain.pem names intermediate A as issuer without its signature.
    var policy = identities(ca: [intermediateA])
    policy.allowInvalidCertificates = true
    policy.validatesDomainName = false
    XCTAssertEqual(failure(decide(policy, chain: "forged-chain.pem", host: nil))?.code, .pinMismatch)
  }

  func testReportOnlyWaivesAnIdentityMismatchButNotTheChain() {
    var policy = identities(leaf: [other])
    policy.enforcesPins = false
    guard case .trusted(let acceptance) = decide(policy) else { return XCTFail("report-only should accept") }
    XCTAssertEqual(acceptance.waivedPinFailure?.code, .pinMismatch)
  }

  // MARK: Expiry

  func testPinsAreEnforcedUntilTheyExpireAndNotAfter() {
    var policy = SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [other])
    policy.pinsExpire = Fixtures.now.addingTimeInterval(86_400)
    XCTAssertEqual(failure(decide(policy))?.code, .pinMismatch)
    let after = Fixtures.now.addingTimeInterval(2 * 86_400)
    guard case .trusted(let acceptance) = decide(policy, at: after) else {
      return XCTFail("expired pins fail open")
    }
    XCTAssertEqual(acceptance.pinsExpired, policy.pinsExpire)
    XCTAssertEqual(acceptance.basis, .validChain)
  }

  func testExpiredPinsStillNeedAValidChainAndHost() {
    var policy = SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [other])
    policy.pinsExpire = Fixtures.now.addingTimeInterval(-1)
    XCTAssertEqual(failure(decide(policy, host: "alpha.net"))?.code, .hostnameMismatch)
    XCTAssertEqual(
      failure(decide(policy, chain: "expired-chain.pem", host: "expired.httpbin.org"))?.code, .expired)
  }

  func testExpiredPinsNoLongerMakeAnInvalidChainAcceptable() {
    // AF: allowInvalid plus a pin accepts a self-signed chain; once the pin
    // expired, the chain has to stand on its own.
    let selfSigned = Fixtures.certificate("ec-selfsigned.pem")
    var policy = SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: [selfSigned.spkiFingerprint],
      validatesDomainName: false,
      allowInvalidCertificates: true)
    XCTAssertTrue(decide(policy, chain: "ec-selfsigned.pem", host: nil).isTrusted)
    policy.pinsExpire = Fixtures.now.addingTimeInterval(-1)
    XCTAssertEqual(failure(decide(policy, chain: "ec-selfsigned.pem", host: nil))?.code, .untrustedChain)
  }

  func testExpiredIdentitiesDoNotLeaveAnAcceptAnythingRule() {
    // Identities were the only guard of a rule that allows invalid
    // certificates and skips the host: once they expire, the chain and the
    // host must stand on their own.
    let selfSigned = Fixtures.certificate("ec-selfsigned.pem")
    var policy = identities(leaf: [selfSigned.spkiFingerprint])
    policy.allowInvalidCertificates = true
    policy.validatesDomainName = false
    XCTAssertTrue(decide(policy, chain: "ec-selfsigned.pem", host: "anything.example").isTrusted)
    policy.pinsExpire = Fixtures.now.addingTimeInterval(-1)
    XCTAssertEqual(
      failure(decide(policy, chain: "ec-selfsigned.pem", host: "anything.example"))?.code, .untrustedChain)
    // A valid chain for another name is not enough either: the host is checked again.
    var valid = identities(leaf: [leaf])
    valid.validatesDomainName = false
    valid.pinsExpire = Fixtures.now.addingTimeInterval(-1)
    XCTAssertEqual(failure(decide(valid, host: "alpha.net"))?.code, .hostnameMismatch)
  }

  func testAnAcceptanceUnderPinsEndsWhenThePinsExpire() {
    var policy = SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [leaf])
    let expiry = Fixtures.now.addingTimeInterval(3600)
    policy.pinsExpire = expiry
    guard case .trusted(let acceptance) = decide(policy) else { return XCTFail("pinned chain") }
    XCTAssertEqual(acceptance.validUntil, expiry)
    XCTAssertNil(acceptance.pinsExpired)
  }

  func testExpiryAppliesToIdentitiesToo() {
    var policy = identities(leaf: [other])
    policy.pinsExpire = Fixtures.now.addingTimeInterval(-1)
    XCTAssertTrue(decide(policy).isTrusted)
  }
}
