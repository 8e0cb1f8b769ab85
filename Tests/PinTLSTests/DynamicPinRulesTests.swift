import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// The update rules, the schedule, the connection check and report-only,
/// with real P-256 signatures and the real chain verifier; time injected.
final class DynamicPinRulesTests: XCTestCase {
  let now = Fixtures.now
  var signer: PrivateKey!
  var verifier: PinListPublicKey!

  override func setUpWithError() throws {
    signer = try PrivateKey.generateP256()
    verifier = try PinListPublicKey(base64: try XCTUnwrap(signer.pinListPublicKey))
  }
  lazy var leaf = Fixtures.certificate("httpbin.pem")

  func entry(
    _ name: String = "httpbin.org", _ fingerprint: Digest256? = nil, days: Double = 30, signed: Bool = true
  ) -> PinListEntry {
    var entry = PinListEntry(
      name: name, fingerprint: fingerprint ?? Fixtures.certificate("httpbin.pem").fingerprint,
      expires: Date(timeIntervalSince1970: (now.timeIntervalSince1970 + days * 86_400).rounded(.down)))
    // A signing failure leaves the entry unsigned, which every test that
    // needs a signature then fails on (never a crash, never a silent pass).
    if signed { entry.signature = try? signer.signSHA256(entry.signedMessage) }
    return entry
  }

  func apply(
    _ entries: [PinListEntry], timestamp: Int64? = nil, stored: PinList = .empty, names: [String] = []
  )
    -> Result<PinListUpdate.Outcome, PinListUpdate.Rejection>
  {
    PinListUpdate.apply(
      PinListDocument(entries: entries, timestamp: timestamp), verifier: verifier, expectedCommonNames: names,
      stored: stored, at: now)
  }

  // MARK: Update rules

  func testExpiredAndDuplicateEntriesAreSkipped() throws {
    let fresh = entry()
    let outcome = try apply([fresh, fresh, entry(days: -1)]).get()
    XCTAssertEqual(outcome.list.entries, [fresh])
    XCTAssertEqual(outcome.expiredSkipped, 1)
    XCTAssertEqual(outcome.duplicatesSkipped, 1)
  }

  func testOneBadSignatureRejectsTheWholeUpdate() {
    var forged = entry("other.example")
    forged.fingerprint = Fixtures.certificate("adn.pem").fingerprint
    guard case .failure(let rejection) = apply([entry(), forged]) else { return XCTFail("accepted") }
    XCTAssertEqual(rejection.reason, "signature")
    XCTAssertTrue(rejection.description.contains("entry 1"), rejection.description)
  }

  func testAnExpiredEntryIsSkippedBeforeItsSignatureIsChecked() throws {
    var expired = entry(days: -1)
    expired.signature = [0x30, 0x00]
    XCTAssertEqual(try apply([entry(), expired]).get().list.entries.count, 1)
  }

  func testNamesOutsideExpectedCommonNamesAreWarnedAndKept() throws {
    let outcome = try apply([entry(), entry("stranger.example")], names: ["httpbin.org"]).get()
    XCTAssertEqual(outcome.unexpectedNames, ["stranger.example"])
    XCTAssertEqual(outcome.list.entries.count, 2)
  }

  func testAVerifiedUpdateReplacesTheList() throws {
    let old = PinList(
      entries: [entry("httpbin.org", Fixtures.certificate("adn.pem").fingerprint)], source: .stored)
    let outcome = try apply([entry()], stored: old).get()
    XCTAssertEqual(outcome.list.entries.map(\.fingerprint), [leaf.fingerprint], "withdrawn entries are gone")
  }

  func testAnUpdateWithNothingUsableIsRefused() {
    guard case .failure(let rejection) = apply([entry(days: -2)]) else { return XCTFail("accepted") }
    XCTAssertEqual(rejection.reason, "empty")
  }

  func testAnOlderChallengeTimestampIsARollback() throws {
    let stored = try PinListUpdate.apply(
      PinListDocument(entries: [entry(signed: false)], timestamp: 2000), verifier: nil,
      expectedCommonNames: [],
      stored: .empty, at: now
    ).get().list
    XCTAssertEqual(stored.timestamp, 2000)
    let older = PinListUpdate.apply(
      PinListDocument(entries: [entry(signed: false)], timestamp: 1999), verifier: nil,
      expectedCommonNames: [],
      stored: stored, at: now)
    guard case .failure(let rejection) = older else { return XCTFail("rollback accepted") }
    XCTAssertEqual(rejection.reason, "rollback")
    let same = PinListUpdate.apply(
      PinListDocument(entries: [entry(signed: false)], timestamp: 2000), verifier: nil,
      expectedCommonNames: [],
      stored: stored, at: now)
    XCTAssertNotNil(try? same.get())
  }

  func testFallbackEntriesExpireAndAreNotChecked() {
    let list = PinListUpdate.fallback(
      PinListDocument(entries: [entry(signed: false), entry(days: -1, signed: false)]), at: now)
    XCTAssertEqual(list.entries.count, 1)
    XCTAssertEqual(list.source, .fallback)
  }

  func testParsingIsStrict() {
    for bad in [
      #"{"fingerprints":[{"name":"a","fingerprint":"AAAA","expires":1}]}"#,
      #"{"fingerprints":[{"name":"a","fingerprint":"\#(leaf.fingerprint.base64)","expires":true}]}"#,
      #"{"fingerprints":[{"name":"a","fingerprint":"\#(leaf.fingerprint.base64)","expires":1.5}]}"#,
      #"{"fingerprints":[{"name":"","fingerprint":"\#(leaf.fingerprint.base64)","expires":1}]}"#,
      #"{"fingerprints":{}}"#, "not json", "[]",
    ] {
      XCTAssertThrowsError(try PinListDocument.parse(Array(bad.utf8), signedEntries: false), bad)
    }
    XCTAssertThrowsError(
      try PinListDocument.parse(
        Array(
          #"{"fingerprints":[{"name":"a","fingerprint":"\#(leaf.fingerprint.base64)","expires":5}]}"#.utf8),
        signedEntries: true), "v1 entries need a signature")
    let document = PinListDocument(entries: [entry()], timestamp: 7)
    XCTAssertEqual(try PinListDocument.parse(document.json(), signedEntries: true), document, "round trip")
  }

  // MARK: Schedule

  func testScheduleFollowsTheEarliestNewestEntry() {
    let day = 86_400.0
    let week = 7 * day
    func next(_ entries: [PinListEntry]) -> TimeInterval {
      PinListSchedule.nextUpdate(for: entries, interval: week, threshold: 14 * day, at: now)
        .timeIntervalSince(now)
    }
    XCTAssertEqual(next([entry(days: 30)]), week, "far from expiry: the interval")
    XCTAssertEqual(next([entry(days: 8)]), 8 * day * 0.125, accuracy: 1, "under the threshold: T × 0.125")
    XCTAssertEqual(next([entry(days: -1)]), 0, "expired: now")
    XCTAssertEqual(next([]), 0, "nothing: now")
    // The newest entry of a name counts: an old one about to expire beside a fresh one does not.
    XCTAssertEqual(next([entry(days: 1), entry(days: 30)]), week)
    XCTAssertEqual(
      next([entry("a.example", days: 2), entry("b.example", days: 30)]), 2 * day * 0.125, accuracy: 1)
  }

  func testRetryBackoffIsBounded() {
    XCTAssertEqual(PinListSchedule.retryDelay(afterFailures: 1, interval: 86_400), 10)
    XCTAssertEqual(PinListSchedule.retryDelay(afterFailures: 3, interval: 86_400), 40)
    XCTAssertEqual(PinListSchedule.retryDelay(afterFailures: 50, interval: 86_400), 900)
    XCTAssertEqual(
      PinListSchedule.retryDelay(afterFailures: 5, interval: 2), 2, "never longer than the interval")
  }

  // MARK: Connection check

  func check(_ entries: [PinListEntry], names: [String] = [], chain: String = "httpbin-chain.pem") -> Result<
    PinListEntry, TrustFailure
  > {
    DynamicPinCheck.evaluate(
      Fixtures.certificates(chain),
      requirement: DynamicPinRequirement(
        list: PinList(entries: entries, source: .fetched), expectedCommonNames: names),
      at: now)
  }

  func testCheckOutcomes() {
    XCTAssertEqual(try? check([entry()]).get().fingerprint, leaf.fingerprint)
    let other = Fixtures.certificate("adn.pem").fingerprint
    XCTAssertEqual(code(check([entry("httpbin.org", other)])), .dynamicPinsUntrusted)
    XCTAssertEqual(code(check([entry("other.example")])), .dynamicPinsEmpty)
    XCTAssertEqual(code(check([])), .dynamicPinsEmpty)
    XCTAssertEqual(code(check([entry(days: -1)])), .dynamicPinsEmpty, "expired entries do not count")
    XCTAssertEqual(code(check([entry()], names: ["api.example"])), .dynamicPinsUntrusted, "CN not expected")
    // depth 1 pins the intermediate.
    var intermediate = entry(
      Fixtures.certificate("int-a.pem").commonName!, Fixtures.certificate("int-a.pem").fingerprint)
    intermediate.depth = 1
    XCTAssertNotNil(try? check([intermediate]).get())
  }

  func code(_ result: Result<PinListEntry, TrustFailure>) -> FailureCode? {
    if case .failure(let failure) = result { return failure.code }
    return nil
  }

  // MARK: Composition and report-only

  func testDynamicPinsOnlyTighten() {
    let harness = PolicyHarness()
    let compiled = harness.compile(.default)
    let chain = Fixtures.chain("httpbin-chain.pem")
    let host = Fixtures.host("httpbin.org")
    let list = DynamicPinRequirement(
      list: PinList(entries: [entry()], source: .fetched), expectedCommonNames: [])
    let trusted = RuleEvaluator.evaluate(
      chain, host: host, policy: .default, dynamicPins: list, verifier: compiled, at: now)
    guard case .trusted(let acceptance) = trusted, case .dynamicPin(_, under: .validChain) = acceptance.basis
    else {
      return XCTFail("\(trusted)")
    }
    XCTAssertLessThanOrEqual(acceptance.validUntil, entry().expires)
    // A valid chain for the host is still refused when the list does not name it.
    let wrong = DynamicPinRequirement(
      list: PinList(
        entries: [entry("httpbin.org", Fixtures.certificate("adn.pem").fingerprint)], source: .fetched),
      expectedCommonNames: [])
    let refused = RuleEvaluator.evaluate(
      chain, host: host, policy: .default, dynamicPins: wrong, verifier: compiled, at: now)
    XCTAssertEqual(refused.rejectionCode, .dynamicPinsUntrusted)
    // The static policy still decides first: the wrong host is refused before the list is read.
    let hostFailure = RuleEvaluator.evaluate(
      chain, host: Fixtures.host("alpha.net"), policy: .default, dynamicPins: list, verifier: compiled,
      at: now)
    XCTAssertEqual(hostFailure.rejectionCode, .hostnameMismatch)
  }

  func testReportOnlyWaivesOnlyThePinCheck() {
    let harness = PolicyHarness()
    var policy = SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: [Fixtures.certificate("adn.pem").spkiFingerprint])
    policy.enforcesPins = false
    let compiled = harness.compile(policy)
    let decision = RuleEvaluator.evaluate(
      Fixtures.chain("httpbin-chain.pem"), host: Fixtures.host("httpbin.org"), policy: policy,
      dynamicPins: nil,
      verifier: compiled, at: now)
    guard case .trusted(let acceptance) = decision else { return XCTFail("\(decision)") }
    XCTAssertEqual(acceptance.waivedPinFailure?.code, .pinMismatch)
    // The chain, the host: still refused.
    XCTAssertEqual(
      RuleEvaluator.evaluate(
        Fixtures.chain("httpbin-chain.pem"), host: Fixtures.host("alpha.net"), policy: policy,
        dynamicPins: nil,
        verifier: compiled, at: now
      ).rejectionCode, .hostnameMismatch)
    // With allowInvalidCertificates the pin was the only check: once waived, the chain must be valid.
    policy.allowInvalidCertificates = true
    let selfSigned = RuleEvaluator.evaluate(
      Fixtures.chain("altname.pem"), host: Fixtures.host("foobar.com"), policy: policy, dynamicPins: nil,
      verifier: harness.compile(policy), at: now)
    XCTAssertNotNil(selfSigned.rejectionCode)
    XCTAssertFalse(selfSigned.isTrusted)
  }

  func testAWaivedAcceptanceIsNotCached() {
    var policy = SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: [Fixtures.certificate("adn.pem").spkiFingerprint])
    policy.enforcesPins = false
    let compiled = PolicyHarness().compile(policy)
    let engine = TrustEngine(cache: FingerprintCache(capacity: 16))
    for _ in 0..<2 {
      XCTAssertTrue(
        compiled.evaluate(
          Fixtures.chain("httpbin-chain.pem"), host: Fixtures.host("httpbin.org"), engine: engine, at: now
        )
        .isTrusted)
    }
    XCTAssertEqual(engine.cache.count, 0)
    XCTAssertEqual(engine.cache.hits, 0)
  }

  func testAListVersionKeysTheCache() {
    let compiled = PolicyHarness().compile(.default)
    let engine = TrustEngine(cache: FingerprintCache(capacity: 16))
    let chain = Fixtures.chain("httpbin-chain.pem")
    let host = Fixtures.host("httpbin.org")
    let good = DynamicPinRequirement(
      list: PinList(entries: [entry()], source: .fetched), expectedCommonNames: [])
    XCTAssertTrue(
      compiled.evaluate(chain, host: host, dynamicPins: (good, 1), engine: engine, at: now).isTrusted)
    let withdrawn = DynamicPinRequirement(
      list: PinList(entries: [entry("other.example")], source: .fetched), expectedCommonNames: [])
    let after = compiled.evaluate(chain, host: host, dynamicPins: (withdrawn, 2), engine: engine, at: now)
    XCTAssertEqual(
      after.rejectionCode, .dynamicPinsEmpty, "the verdict under list 1 is not served under list 2")
  }
}

extension TrustDecision {
  var rejectionCode: FailureCode? {
    if case .rejected(let failure) = self { return failure.code }
    return nil
  }
}
