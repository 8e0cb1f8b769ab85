import XCTest

@testable import PinProxy

/// `Deadline`, the moment a machine waits until: counted from the loop's
/// clock, due at once for no wait, saturating rather than wrapping round
/// to the past for a huge one.
final class MachineDeadlineTests: XCTestCase {
  let now: UInt64 = 5_000_000_000

  func testAWaitIsCountedInNanosecondsFromNow() {
    let deadline = Deadline(seconds: 1.5, from: now)
    XCTAssertEqual(deadline.at, now + 1_500_000_000)
    XCTAssertEqual(deadline.seconds, 1.5)
    XCTAssertFalse(deadline.hasPassed(at: deadline.at - 1))
    XCTAssertTrue(deadline.hasPassed(at: deadline.at))
  }

  func testNoWaitIsDueAtOnceAndAHugeOneNeverWrapsToThePast() {
    for seconds in [0, -3, Double.nan, -Double.infinity] {
      XCTAssertEqual(Deadline(seconds: seconds, from: now).at, now, "\(seconds)")
    }
    // The loop's arithmetic caps a wait at Int64.max nanoseconds
    // (PinEventLoopTests' DeadlineTests): centuries, never the past.
    for seconds in [Double.infinity, 1e300, Double(UInt64.max) / 1e9] {
      let deadline = Deadline(seconds: seconds, from: now)
      XCTAssertEqual(deadline.at, now + UInt64(Int64.max), "\(seconds)")
      XCTAssertFalse(deadline.hasPassed(at: now), "\(seconds)")
    }
    XCTAssertEqual(Deadline(seconds: 60, from: .max - 1).at, .max, "a sum past the clock's end saturates")
  }
}
