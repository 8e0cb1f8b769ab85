import Foundation
import XCTest

@testable import PinProxy

/// Small things the operator reads: relative times, and the rule column
/// that must not break a name in the middle.
final class OperatorTextTests: XCTestCase {
  func testRelativeTimesSayJustNowWithinASecond() {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    XCTAssertEqual(OperatorStatus.relative(now, from: now), "just now")
    XCTAssertEqual(OperatorStatus.relative(now.addingTimeInterval(-0.4), from: now), "just now")
    XCTAssertEqual(OperatorStatus.relative(now.addingTimeInterval(-5), from: now), "5 s ago")
    XCTAssertEqual(OperatorStatus.relative(now.addingTimeInterval(3 * 86_400 + 3600), from: now), "in 3 d 1 h")
  }
}
