import Dispatch
import Foundation
import XCTest

@testable import PinEventLoop

/// Timers that fire together, and re-armable timers whose work holds their
/// owner strongly (as a session's do): cancelling and invalidating govern
/// what runs.
final class TimerTableTests: XCTestCase {
  /// Two timers fall due in the same sweep; the first one's work cancels
  /// the second (as closing a connection cancels its timeouts). The second
  /// must not run.
  func testATimerCancelledByAnEarlierOneInTheSameSweepDoesNotRun() {
    let loop = EventLoop(name: "sweep")
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var secondRan = false
    nonisolated(unsafe) var second: LoopTimer?
    let first = loop.makeTimer {
      second?.cancel()
      loop.execute { done.signal() }
    }
    second = loop.makeTimer { secondRan = true }
    loop.execute {
      first.schedule(after: 0.01)
      // Later by a hair, so it sorts after `first` in the sweep they share.
      second?.schedule(after: 0.011)
    }
    XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
    loop.runAndWait {}
    XCTAssertFalse(secondRan)
  }

  /// An invalidated timer lets go of its work (and so of what the work
  /// holds), and arming it again does nothing.
  func testAnInvalidatedTimerLetsGoOfItsOwnerAndNeverFires() {
    final class Owner: Sendable {}
    let loop = EventLoop(name: "invalidate")
    nonisolated(unsafe) var fired = false
    weak var released: Owner?
    let timer: LoopTimer = {
      let owner = Owner()
      released = owner
      return loop.makeTimer { [owner] in
        _ = owner
        fired = true
      }
    }()
    XCTAssertNotNil(released, "the work holds its owner")
    loop.runAndWait {
      timer.schedule(after: 0.01)
      timer.invalidate()
      timer.schedule(after: 0.01)
    }
    XCTAssertNil(released, "invalidating let go of the work")
    usleep(300_000)
    loop.runAndWait {}
    XCTAssertFalse(fired)
  }

  /// A re-armable timer keeps its deadline in itself: pushed later it fires
  /// once, at the later deadline; cancelled it does not fire; armed again
  /// after a cancel or after firing, it fires again — beside a one-shot
  /// timer of the same loop.
  func testARearmedTimerFiresOnceAtItsLastDeadlineAndAgainWhenArmedAgain() {
    let loop = EventLoop(name: "rearm")
    final class Fired: @unchecked Sendable {
      private let lock = NSLock()
      private var list: [String] = []
      func add(_ name: String) { lock.withLock { list.append(name) } }
      var all: [String] { lock.withLock { list } }
    }
    let fired = Fired()
    let started = DispatchTime.now().uptimeNanoseconds
    let timer = loop.makeTimer {
      let elapsed = DispatchTime.now().uptimeNanoseconds - started
      fired.add("rearmable after \(elapsed / 1_000_000) ms")
    }
    let cancelled = loop.makeTimer { fired.add("cancelled") }
    loop.runAndWait {
      timer.schedule(after: 0.05)
      timer.schedule(after: 0.3)
      cancelled.schedule(after: 0.05)
      cancelled.cancel()
      _ = loop.schedule(after: 0.1) { fired.add("one-shot") }
    }
    // Waited for, not slept on: a loaded machine may fire late.
    func wait(for count: Int) {
      let deadline = Date().addingTimeInterval(10)
      while fired.all.count < count && Date() < deadline { usleep(20_000) }
      usleep(100_000)
      loop.runAndWait {}
    }
    wait(for: 2)
    let first = fired.all
    XCTAssertEqual(first.count, 2, "\(first)")
    XCTAssertEqual(first.first, "one-shot")
    let elapsed = Int(first.last?.split(separator: " ")[2] ?? "") ?? 0
    XCTAssertGreaterThanOrEqual(elapsed, 300, "fired at the deadline it was pushed to: \(first)")
    loop.runAndWait {
      cancelled.schedule(after: 0.05)
      timer.schedule(after: 0.05)
    }
    wait(for: 4)
    let second = fired.all
    XCTAssertEqual(second.count, 4, "\(second)")
    XCTAssertTrue(second.contains("cancelled"), "armed again after a cancel, it fires")
    timer.invalidate()
    cancelled.invalidate()
  }

  /// A timer made before its work (an owner's `let`, its work given at the
  /// end of the owner's init): armed before the work is given it does
  /// nothing; armed after, it fires the work given.
  func testATimerGivenItsWorkLaterFiresOnlyOnceItHasIt() {
    let loop = EventLoop(name: "work-later")
    let fired = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var runs = 0
    let timer = loop.makeTimer()
    loop.runAndWait { timer.schedule(after: 0.01) }
    usleep(300_000)
    loop.runAndWait {}
    timer.setWork {
      runs += 1
      fired.signal()
    }
    XCTAssertEqual(runs, 0, "armed without work: nothing was listed to fire")
    loop.runAndWait { timer.schedule(after: 0.01) }
    XCTAssertEqual(fired.wait(timeout: .now() + 5), .success)
    loop.runAndWait {}
    XCTAssertEqual(runs, 1)
    timer.invalidate()
  }

  /// Connections come and go: a slot let go of by an invalidated timer is
  /// taken by the next one armed, and only the timers still listed fire —
  /// the new holder of a slot, never the old one.
  func testASlotLetGoOfServesTheNextTimerAndOnlyListedTimersFire() {
    let loop = EventLoop(name: "slots")
    let fired = Locked()
    var timers = (0..<8).map { index in loop.makeTimer { fired.add(index) } }
    loop.runAndWait {
      for timer in timers { timer.schedule(after: 0.02) }
      // Every other one ends before its deadline.
      for index in stride(from: 0, to: 8, by: 2) { timers[index].invalidate() }
    }
    // Four new timers take the four freed slots.
    timers += (8..<12).map { index in loop.makeTimer { fired.add(index) } }
    loop.runAndWait { for timer in timers[8...] { timer.schedule(after: 0.02) } }
    let deadline = Date().addingTimeInterval(10)
    while fired.all.count < 8 && Date() < deadline { usleep(20_000) }
    usleep(100_000)
    loop.runAndWait {}
    XCTAssertEqual(fired.all.sorted(), [1, 3, 5, 7, 8, 9, 10, 11])
    loop.runAndWait { for timer in timers { timer.invalidate() } }
  }
}

/// Indices of fired timers, from the loop's thread.
private final class Locked: @unchecked Sendable {
  private let lock = NSLock()
  private var list: [Int] = []
  func add(_ index: Int) { lock.withLock { list.append(index) } }
  var all: [Int] { lock.withLock { list } }
}
