import PinEventLoop
import Synchronization
import XCTest

@testable import PinProxy

/// The admin listener's slots: a newcomer evicts the connection waiting
/// longest on a half head, never one being answered nor one not read yet,
/// and the heavy views leave a reserve for health checks and scrapes.
final class AdminSlotsTests: XCTestCase {
  lazy var loop = EventLoop(name: "admin-slots-test")

  func testANewcomerEvictsTheLongestWaitingHeadAndNeverOneBeingAnswered() throws {
    let slots = AdminSlots(capacity: 4)
    let evicted = Mutex<[Int]>([])
    var ids: [UInt64] = []
    for index in 0..<4 {
      ids.append(try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append(index) } }))
      usleep(1000)
    }
    // Connection 0 sent its whole request (answering); 1, 2 and 3 trickle.
    XCTAssertTrue(slots.decide(ids[0], .wholeHead))
    XCTAssertTrue(slots.headArrived(ids[0], heavy: false))
    for id in ids[1...] { XCTAssertTrue(slots.decide(id, .partOfHead)) }
    let newcomer = try XCTUnwrap(slots.admit(on: loop) { evicted.withLock { $0.append(4) } })
    XCTAssertTrue(slots.decide(newcomer, .partOfHead), "a full table of trickled heads admits the newcomer")
    loop.queue.sync {}
    XCTAssertEqual(evicted.withLock { $0 }, [1], "the longest-waiting head goes, not the one answered")
    XCTAssertEqual(slots.count, 4)
    slots.release(ids[1])  // the evicted one's close: nothing more to give back
    XCTAssertEqual(slots.count, 4)
    // Every slot answering: a half head is closed instead.
    for id in [ids[0], ids[2], ids[3], newcomer] { XCTAssertTrue(slots.headArrived(id, heavy: false)) }
    XCTAssertNil(slots.admit(on: loop, arrival: .partOfHead) {})
    let late = try XCTUnwrap(slots.admit(on: loop) {})
    XCTAssertFalse(slots.decide(late, .partOfHead))
    slots.release(late)
    slots.release(ids[2])
    XCTAssertNotNil(slots.admit(on: loop, arrival: .partOfHead) {})
  }

  /// A connection that has sent nothing is judged by its first bytes, never
  /// by how long the loop took to read them: re-opening holders that evict
  /// each other's half heads never push out a probe waiting to be read, and
  /// its whole head is answered past a table of them.
  func testAProbeWaitingToBeReadOutlastsReopeningHalfHeads() throws {
    let slots = AdminSlots(capacity: 3)
    let closed = Mutex<[String]>([])
    let probe = try XCTUnwrap(slots.admit(on: loop) { closed.withLock { $0.append("probe") } })
    for index in 0..<20 {
      let holder = try XCTUnwrap(slots.admit(on: loop) { closed.withLock { $0.append("holder \(index)") } })
      XCTAssertTrue(slots.decide(holder, .partOfHead))
    }
    usleep(300_000)  // however late the probe is read
    loop.queue.sync {}
    XCTAssertEqual(closed.withLock { $0 }, (0..<17).map { "holder \($0)" }, "the oldest half heads went")
    XCTAssertTrue(slots.decide(probe, .wholeHead))
    loop.queue.sync {}
    XCTAssertEqual(closed.withLock { $0 }.last, "holder 17", "the probe took a stalled half head's slot")
    XCTAssertTrue(slots.headArrived(probe, heavy: false))
  }

  /// Silent connections wait outside the slots, at most `undecidedCapacity`
  /// of them: a newcomer pushes out the oldest, which is closed when its
  /// bytes come at last. A whole head is answered past a table of answering
  /// ones, up to the overflow.
  func testSilentConnectionsAreBoundedAndAWholeHeadGetsTheOverflow() throws {
    let slots = AdminSlots(capacity: 2)
    let closed = Mutex<[Int]>([])
    let silent = try (0...AdminSlots.undecidedCapacity).map { index in
      try XCTUnwrap(slots.admit(on: loop) { closed.withLock { $0.append(index) } })
    }
    loop.queue.sync {}
    XCTAssertEqual(closed.withLock { $0 }, [0], "the oldest silent one was pushed out")
    XCTAssertEqual(slots.count, AdminSlots.undecidedCapacity)
    XCTAssertFalse(slots.decide(silent[0], .wholeHead), "pushed out: its late head is not answered")
    for id in silent[1...2] {
      XCTAssertTrue(slots.decide(id, .wholeHead))
      XCTAssertTrue(slots.headArrived(id, heavy: false))
    }
    // Both slots answering: a half head is refused, whole heads get the overflow.
    XCTAssertFalse(slots.decide(silent[3], .partOfHead))
    for id in silent[4..<(4 + AdminSlots.answeringOverflow)] { XCTAssertTrue(slots.decide(id, .wholeHead)) }
    XCTAssertFalse(slots.decide(silent[4 + AdminSlots.answeringOverflow], .wholeHead))
    XCTAssertNil(slots.admit(on: loop, arrival: .wholeHead) {})
  }

  func testHeavyViewsLeaveTheScrapeReserve() {
    let slots = AdminSlots(capacity: 16)
    let heavy = (0..<16).map { _ in slots.admit(on: loop, arrival: .wholeHead) {}! }
    let granted = heavy.filter { slots.headArrived($0, heavy: true) }
    XCTAssertEqual(granted.count, 16 - AdminSlots.scrapeReserve)
    // A scrape still has a slot: the refused heavy views are closed and a
    // /metrics request is served.
    for id in heavy where !granted.contains(id) { slots.release(id) }
    let scrape = slots.admit(on: loop, arrival: .wholeHead) {}
    XCTAssertNotNil(scrape)
    XCTAssertTrue(slots.headArrived(scrape!, heavy: false))
    slots.release(granted[0])
    let another = slots.admit(on: loop, arrival: .wholeHead) {}!
    XCTAssertTrue(slots.headArrived(another, heavy: true), "a released heavy slot serves the next")
  }
}
