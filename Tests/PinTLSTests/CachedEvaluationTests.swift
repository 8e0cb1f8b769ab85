import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// The fingerprint cache in front of the real verifier.
final class CachedEvaluationTests: XCTestCase {
  lazy var harness = PolicyHarness()
  lazy var chain = Fixtures.chain("httpbin-chain.pem")
  lazy var host = Fixtures.host("httpbin.org")

  func testHitSkipsVerification() {
    let compiled = harness.compile(.default)
    let counting = CountingVerifier(compiled)
    let engine = TrustEngine(cache: FingerprintCache(capacity: 16))
    let first = engine.evaluate(
      chain, host: host, policy: .default, identity: compiled.identity, verifier: counting, at: Fixtures.now)
    XCTAssertTrue(first.isTrusted)
    // A full evaluation hands its path to the caller; the cache keeps none.
    guard case .trusted(var acceptance) = first else { return XCTFail() }
    XCTAssertFalse(acceptance.path.isEmpty)
    acceptance.path = []
    let cached = TrustDecision.trusted(acceptance)
    let afterMiss = counting.count
    XCTAssertGreaterThan(afterMiss, 0)
    for _ in 0..<10 {
      let again = engine.evaluate(
        chain, host: host, policy: .default, identity: compiled.identity, verifier: counting, at: Fixtures.now
      )
      XCTAssertEqual(again, cached)
    }
    XCTAssertEqual(counting.count, afterMiss, "a hit must not build or verify a chain")
    XCTAssertEqual(engine.cache.hits, 10)
  }

  /// Each loop has a partition of its own: a verdict cached on one is not
  /// served on another, a reload empties them all, and the counts add up.
  func testPartitionsAreSeparateAndClearedTogether() {
    let compiled = harness.compile(.default)
    let counting = CountingVerifier(compiled)
    let engine = TrustEngine(partitions: 2, capacity: 16)
    XCTAssertEqual(engine.caches.map(\.capacity), [8, 8])
    func evaluate(on loop: Int) -> TrustDecision {
      engine.partition(loop).evaluate(
        chain, host: host, policy: .default, identity: compiled.identity, verifier: counting, at: Fixtures.now
      )
    }
    XCTAssertTrue(evaluate(on: 0).isTrusted)
    let oneEvaluation = counting.count
    XCTAssertTrue(evaluate(on: 0).isTrusted)
    XCTAssertEqual(counting.count, oneEvaluation, "a hit on its own partition")
    XCTAssertTrue(evaluate(on: 1).isTrusted)
    XCTAssertEqual(counting.count, 2 * oneEvaluation, "the other loop's partition evaluates once itself")
    XCTAssertTrue(evaluate(on: 3).isTrusted)
    XCTAssertEqual(counting.count, 2 * oneEvaluation, "loop 3 wraps around to partition 1")
    XCTAssertEqual(engine.hits, 2)
    XCTAssertEqual(engine.misses, 2)
    XCTAssertEqual(engine.entryCount, 2)
    engine.removeAll()
    XCTAssertEqual(engine.entryCount, 0)
    XCTAssertTrue(evaluate(on: 1).isTrusted)
    XCTAssertEqual(counting.count, 3 * oneEvaluation, "after removeAll the verdict is made again")
  }

  func testRejectionsAreNotCached() {
    let compiled = harness.compile(.default)
    let counting = CountingVerifier(compiled)
    let engine = TrustEngine()
    let wrongHost = Fixtures.host("apple.com")
    for _ in 0..<3 {
      let decision = engine.evaluate(
        chain, host: wrongHost, policy: .default, identity: compiled.identity, verifier: counting,
        at: Fixtures.now)
      XCTAssertFalse(decision.isTrusted)
    }
    XCTAssertEqual(counting.count, 3)
    XCTAssertEqual(engine.cache.count, 0)
  }

  func testEntryEndsAtTheChainsEarliestNotAfter() {
    let compiled = harness.compile(.default)
    let counting = CountingVerifier(compiled)
    let engine = TrustEngine(cache: FingerprintCache(capacity: 16, ttl: 100 * 365 * 86400))
    let notAfter = Fixtures.certificates("httpbin-chain.pem").map(\.notAfter).min()!
    let justBefore = notAfter.addingTimeInterval(-1)
    XCTAssertTrue(
      engine.evaluate(
        chain, host: host, policy: .default, identity: compiled.identity, verifier: counting, at: justBefore
      )
      .isTrusted)
    // The entry ends at notAfter; the certificate is still valid at that very
    // instant (RFC 5280 §4.1.2.5, inclusive), which a fresh evaluation finds.
    let atExpiry = engine.evaluate(
      chain, host: host, policy: .default, identity: compiled.identity, verifier: counting, at: notAfter)
    XCTAssertTrue(atExpiry.isTrusted, atExpiry.summary)
    XCTAssertEqual(counting.count, 2, "the lookup at notAfter must evaluate again")
    let afterExpiry = engine.evaluate(
      chain, host: host, policy: .default, identity: compiled.identity, verifier: counting,
      at: notAfter.addingTimeInterval(0.5))
    XCTAssertTrue(afterExpiry.summary.hasPrefix("rejected: expired"), afterExpiry.summary)
    XCTAssertEqual(counting.count, 3, "the expired lookup must evaluate again")
  }

  func testEntryEndsAfterTheTTL() {
    let compiled = harness.compile(.default)
    let counting = CountingVerifier(compiled)
    let engine = TrustEngine(cache: FingerprintCache(capacity: 16, ttl: 60))
    for offset in [0.0, 59.0, 60.0] {
      _ = engine.evaluate(
        chain, host: host, policy: .default, identity: compiled.identity, verifier: counting,
        at: Fixtures.now.addingTimeInterval(offset))
    }
    XCTAssertEqual(counting.count, 2, "hit at +59 s, miss at +60 s")
  }

  func testNewPolicyGenerationDoesNotSeeOldEntries() {
    let engine = TrustEngine()
    let oldPolicy = harness.compile(.default)
    XCTAssertTrue(oldPolicy.evaluate(chain, host: host, engine: engine, at: Fixtures.now).isTrusted)
    // The reloaded rule pins a key the chain does not have: a stale hit would be a false accept.
    let pinned = SecurityPolicy(
      pinningMode: .publicKey, pinnedPublicKeyHashes: [Fixtures.certificate("adn.pem").spkiFingerprint])
    let newPolicy = harness.compile(pinned, generation: 2)
    let decision = newPolicy.evaluate(chain, host: host, engine: engine, at: Fixtures.now)
    XCTAssertTrue(decision.summary.hasPrefix("rejected: pin-mismatch"), decision.summary)
  }

  func testHostIsPartOfTheKey() {
    let engine = TrustEngine()
    var policy = SecurityPolicy.default
    policy.validatesDomainName = true
    let compiled = harness.compile(policy)
    XCTAssertTrue(compiled.evaluate(chain, host: host, engine: engine, at: Fixtures.now).isTrusted)
    XCTAssertFalse(
      compiled.evaluate(chain, host: Fixtures.host("apple.com"), engine: engine, at: Fixtures.now).isTrusted)
  }

  func testConcurrentEvaluationsFromManyThreadsAgree() {
    let compiled = harness.compile(.default)
    let counting = CountingVerifier(compiled)
    let engine = TrustEngine(cache: FingerprintCache(capacity: 64, shardCount: 1))
    let chains = ["httpbin-chain.pem", "adn-chain.pem", "ecdsa-chain.pem"].map(Fixtures.chain)
    let hosts = ["httpbin.org", "alpha.net", "ecdsa.httpbin.org"].map(Fixtures.host)
    // The truth for each (chain, host) pair, from uncached sequential evaluation.
    let expected = (0..<9).map { pair in
      TrustEvaluator.evaluate(
        chains[pair % 3], host: hosts[pair / 3], policy: .default, verifier: compiled, at: Fixtures.now)
    }
    XCTAssertEqual(
      expected.filter(\.isTrusted).count, 4, "three own hosts, and *.httpbin.org covers ecdsa.httpbin.org")
    let failures = NSLock()
    nonisolated(unsafe) var wrong = 0
    DispatchQueue.concurrentPerform(iterations: 4000) { iteration in
      let pair = iteration % 9
      let decision = engine.evaluate(
        chains[pair % 3], host: hosts[pair / 3], policy: .default, identity: compiled.identity,
        verifier: counting, at: Fixtures.now)
      if decision.isTrusted != expected[pair].isTrusted { failures.withLock { wrong += 1 } }
    }
    XCTAssertEqual(wrong, 0)
    XCTAssertEqual(engine.cache.count, 4)
    XCTAssertGreaterThan(engine.cache.hits, 1000)
  }
}
