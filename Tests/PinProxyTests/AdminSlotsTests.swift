import PinEventLoop
import Synchronization
import XCTest

@testable import PinProxy

/// The admin listener's slots: a newcomer evicts the connection waiting
/// longest for its head, never one being answered, and the heavy views
/// leave a reserve for health checks and scrapes.
final class AdminSlotsTests: XCTestCase {
  let loop = EventLoop(name: "admin-slots-test")

  func testANewcomerEvictsTheLongestWaitingHeadAndNeverOneBeingAnswered() throws {
    let slots = AdminSlots(capacity: 4)
    let evicted = Mutex<[Int]>([])
    var ids: [UInt64] = []
    for index in 0..<4 {
      ids.append(try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append(index) } }))
      usleep(1000)
    }
    // Connection 0 sent its request (answering); 1, 2 and 3 trickle.
    XCTAssertTrue(slots.headArrived(ids[0], heavy: false))
    for id in ids[1...] { slots.partOfHeadArrived(id) }
    let newcomer = slots.admit(on: loop) { evicted.withLock { $0.append(4) } }
    XCTAssertNotNil(newcomer, "a full table of trickled heads admits the newcomer")
    loop.queue.sync {}
    XCTAssertEqual(evicted.withLock { $0 }, [1], "the longest-waiting head goes, not the one answered")
    XCTAssertEqual(slots.count, 4)
    slots.release(ids[1])  // the evicted one's close: nothing more to give back
    XCTAssertEqual(slots.count, 4)
    // Every slot answering: the newcomer is closed instead.
    for id in [ids[0], ids[2], ids[3], newcomer!] { XCTAssertTrue(slots.headArrived(id, heavy: false)) }
    XCTAssertNil(slots.admit(on: loop) {})
    slots.release(ids[2])
    XCTAssertNotNil(slots.admit(on: loop) {})
  }

  /// A connection not read yet (a probe whose head is on its way) is not
  /// evicted while stalled half-heads are there, nor within the grace
  /// after its accept; then it may go like any silent one.
  func testAStalledHalfHeadGoesBeforeAConnectionNotReadYet() throws {
    let slots = AdminSlots(capacity: 3)
    let evicted = Mutex<[String]>([])
    let probe = try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append("probe") } })
    let holders = try (0..<2).map { index in
      try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append("holder \(index)") } })
    }
    for holder in holders { slots.partOfHeadArrived(holder) }
    // Two re-opening holders: each evicts a stalled half-head, never the probe.
    for index in 2..<4 {
      let holder = try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append("holder \(index)") } })
      slots.partOfHeadArrived(holder)
    }
    loop.queue.sync {}
    XCTAssertEqual(evicted.withLock { $0 }, ["holder 0", "holder 1"])
    // Nothing but the probe is evictable once the half-heads are answered…
    for id in [UInt64](slots.testingIDs) where id != probe {
      XCTAssertTrue(slots.headArrived(id, heavy: false))
    }
    // …and within its grace it is kept: the newcomer is closed instead.
    XCTAssertNil(slots.admit(on: loop) {})
    usleep(UInt32(AdminSlots.unreadGrace / 1000) + 20_000)
    XCTAssertNotNil(slots.admit(on: loop) {}, "a connection silent past the grace may go")
    loop.queue.sync {}
    XCTAssertEqual(evicted.withLock { $0 }.last, "probe")
  }

  /// A newcomer whose whole head is already there (a health probe) is
  /// admitted past a table of unevictable connections, up to the overflow;
  /// one with part of a head is evictable from its first moment.
  func testAWholeHeadIsAnsweredPastAFullTableAndAPartialOneGoesFirst() throws {
    let slots = AdminSlots(capacity: 2)
    let evicted = Mutex<[String]>([])
    let fresh = try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append("fresh") } })
    _ = try XCTUnwrap(
      slots.admit(on: loop, arrival: .partOfHead) { evicted.withLock { $0.append("partial") } })
    XCTAssertNotNil(slots.admit(on: loop) {})
    loop.queue.sync {}
    XCTAssertEqual(evicted.withLock { $0 }, ["partial"], "the half head goes, not the one not read yet")
    // Nothing evictable now (both within their grace): only whole heads get in, up to the overflow.
    XCTAssertNil(slots.admit(on: loop) {})
    XCTAssertNil(slots.admit(on: loop, arrival: .partOfHead) {})
    for _ in 0..<AdminSlots.answeringOverflow {
      XCTAssertNotNil(slots.admit(on: loop, arrival: .wholeHead) {})
    }
    XCTAssertNil(slots.admit(on: loop, arrival: .wholeHead) {})
    slots.release(fresh)
    XCTAssertNil(slots.admit(on: loop) {}, "still past capacity after one left")
  }

  func testHeavyViewsLeaveTheScrapeReserve() {
    let slots = AdminSlots(capacity: 16)
    let heavy = (0..<16).map { _ in slots.admit(on: loop) {}! }
    let granted = heavy.filter { slots.headArrived($0, heavy: true) }
    XCTAssertEqual(granted.count, 16 - AdminSlots.scrapeReserve)
    // A scrape still has a slot: the refused heavy views are closed and a
    // /metrics request is served.
    for id in heavy where !granted.contains(id) { slots.release(id) }
    let scrape = slots.admit(on: loop) {}
    XCTAssertNotNil(scrape)
    XCTAssertTrue(slots.headArrived(scrape!, heavy: false))
    slots.release(granted[0])
    let another = slots.admit(on: loop) {}!
    XCTAssertTrue(slots.headArrived(another, heavy: true), "a released heavy slot serves the next")
  }
}
