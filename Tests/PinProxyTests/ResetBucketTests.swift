import XCTest

@testable import PinProxy

/// `ResetBucket`, the bound on client-cancelled exchanges (CVE-2023-44487),
/// with the clock injected as uptime nanoseconds: no sleeping.
final class ResetBucketTests: XCTestCase {
  /// An arbitrary start: `take` treats 0 as "never called".
  let start: UInt64 = 5_000_000_000
  let second: UInt64 = 1_000_000_000

  func testABurstBeyondTheCapacityIsRefused() {
    var bucket = ResetBucket()
    let burst = Int(ResetBucket.burst)
    for index in 0..<burst { XCTAssertTrue(bucket.take(now: start), "token \(index)") }
    XCTAssertFalse(bucket.take(now: start), "the burst is spent")
    XCTAssertFalse(bucket.take(now: start + 1), "a nanosecond later still nothing")
  }

  func testTokensComeBackAtTheRefillRate() {
    var bucket = ResetBucket()
    for _ in 0..<Int(ResetBucket.burst) { _ = bucket.take(now: start) }
    let perToken = UInt64(Double(second) / ResetBucket.perSecond)
    XCTAssertFalse(bucket.take(now: start + perToken / 2), "half a token is not one")
    // The refused call above still counted its half token: one more half makes one.
    XCTAssertTrue(bucket.take(now: start + perToken))
    XCTAssertFalse(bucket.take(now: start + perToken))
    // One second brings `perSecond` tokens back.
    let later = start + perToken + second
    for index in 0..<Int(ResetBucket.perSecond) { XCTAssertTrue(bucket.take(now: later), "token \(index)") }
    XCTAssertFalse(bucket.take(now: later))
  }

  func testALongQuietSpellRefillsOnlyUpToTheBurst() {
    var bucket = ResetBucket()
    XCTAssertTrue(bucket.take(now: start))
    let muchLater = start + 3600 * second
    for index in 0..<Int(ResetBucket.burst) { XCTAssertTrue(bucket.take(now: muchLater), "token \(index)") }
    XCTAssertFalse(bucket.take(now: muchLater), "an hour of quiet is worth one burst, no more")
  }
}
