import Foundation
import PinTrust
import XCTest

final class FingerprintCacheTests: XCTestCase {
  let start = Date(timeIntervalSince1970: 1_780_272_000)

  func key(_ index: Int, generation: UInt64 = 1, host: String = "example.com") -> FingerprintCache.Key {
    FingerprintCache.Key(
      policy: PolicyIdentity(generation: generation, rule: .domain(0)), host: TrustHost(host),
      chain: PresentedChain([Array("certificate \(index)".utf8)]))
  }

  let acceptance = Acceptance(basis: .validChain, validUntil: .distantFuture)

  func testLookupFindsWhatWasInsertedByContentNotIdentity() {
    let cache = FingerprintCache(capacity: 8)
    cache.insert(key(1), acceptance: acceptance, at: start)
    XCTAssertEqual(cache.lookup(key(1), at: start), acceptance)
    XCTAssertNil(cache.lookup(key(2), at: start))
    XCTAssertNil(cache.lookup(key(1, host: "other.com"), at: start))
    XCTAssertNil(cache.lookup(key(1, generation: 2), at: start))
    XCTAssertEqual(cache.hits, 1)
    XCTAssertEqual(cache.misses, 3)
  }

  func testChainsThatDifferOnlyBeforeTheHashedTailAreDistinct() {
    // The lookup hash reads the tail; equality must still read every byte.
    let tail = [UInt8](repeating: 7, count: 64)
    let a = FingerprintCache.Key(
      policy: PolicyIdentity(generation: 1, rule: .domain(0)), host: nil, chain: PresentedChain([[1] + tail]))
    let b = FingerprintCache.Key(
      policy: PolicyIdentity(generation: 1, rule: .domain(0)), host: nil, chain: PresentedChain([[2] + tail]))
    XCTAssertEqual(a.hashValue, b.hashValue)
    let cache = FingerprintCache(capacity: 8)
    cache.insert(a, acceptance: acceptance, at: start)
    XCTAssertNil(cache.lookup(b, at: start))
    XCTAssertNotNil(cache.lookup(a, at: start))
  }

  func testEntryExpiresAtValidUntilOrTTL() {
    let cache = FingerprintCache(capacity: 8, ttl: 100, shardCount: 1)
    let shortLived = Acceptance(basis: .validChain, validUntil: start.addingTimeInterval(10))
    cache.insert(key(1), acceptance: shortLived, at: start)
    cache.insert(key(2), acceptance: acceptance, at: start)
    XCTAssertNotNil(cache.lookup(key(1), at: start.addingTimeInterval(9.9)))
    XCTAssertNil(cache.lookup(key(1), at: start.addingTimeInterval(10)))
    XCTAssertNotNil(cache.lookup(key(2), at: start.addingTimeInterval(99)))
    XCTAssertNil(cache.lookup(key(2), at: start.addingTimeInterval(100)))
  }

  func testAlreadyExpiredAcceptanceIsNotStored() {
    let cache = FingerprintCache(capacity: 8)
    cache.insert(key(1), acceptance: Acceptance(basis: .validChain, validUntil: start), at: start)
    XCTAssertEqual(cache.count, 0)
  }

  func testBoundedAndRecentlyUsedEntriesSurviveEviction() {
    let cache = FingerprintCache(capacity: 4, shardCount: 1)
    for index in 0..<4 { cache.insert(key(index), acceptance: acceptance, at: start) }
    XCTAssertNotNil(cache.lookup(key(0), at: start))  // marks 0 as referenced
    for index in 4..<7 { cache.insert(key(index), acceptance: acceptance, at: start) }  // one sweep
    XCTAssertEqual(cache.count, 4)
    XCTAssertNotNil(cache.lookup(key(0), at: start), "second chance keeps the entry that was hit")
    XCTAssertNil(cache.lookup(key(1), at: start))
  }

  func testManyInsertsNeverExceedCapacity() {
    let cache = FingerprintCache(capacity: 100, shardCount: 8)
    for index in 0..<10_000 { cache.insert(key(index), acceptance: acceptance, at: start) }
    XCTAssertLessThanOrEqual(cache.count, 104)  // each of 8 shards holds ceil(100 / 8)
  }

  func testRemoveAllEmptiesTheCache() {
    let cache = FingerprintCache(capacity: 8)
    cache.insert(key(1), acceptance: acceptance, at: start)
    cache.removeAll()
    XCTAssertEqual(cache.count, 0)
    XCTAssertNil(cache.lookup(key(1), at: start))
  }

  func testConcurrentInsertAndLookup() {
    let cache = FingerprintCache(capacity: 256)
    let keys = (0..<64).map { key($0) }
    let start = self.start
    let acceptance = self.acceptance
    DispatchQueue.concurrentPerform(iterations: 20_000) { iteration in
      let key = keys[iteration % keys.count]
      if cache.lookup(key, at: start) == nil { cache.insert(key, acceptance: acceptance, at: start) }
    }
    XCTAssertEqual(cache.count, 64)
    XCTAssertEqual(cache.hits + cache.misses, 20_000)
    XCTAssertGreaterThanOrEqual(cache.misses, 64)
  }
}
