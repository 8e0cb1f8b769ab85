import XCTest

@testable import PinEventLoop

/// A timeout of any size must not trap: a configured 1e12 s used to overflow.
final class DeadlineTests: XCTestCase {
  func testDeadlinesSaturate() {
    XCTAssertEqual(EventLoop.deadline(after: 1, now: 100), 1_000_000_100)
    XCTAssertEqual(EventLoop.deadline(after: -5, now: 100), 100)
    XCTAssertEqual(EventLoop.deadline(after: .nan, now: 100), 100)
    XCTAssertEqual(EventLoop.deadline(after: 1e12, now: 100), 100 + UInt64(Int64.max))
    XCTAssertEqual(EventLoop.deadline(after: .infinity, now: 100), 100 + UInt64(Int64.max))
    XCTAssertEqual(EventLoop.deadline(after: 1e12, now: UInt64.max - 5), UInt64.max)
  }
}
