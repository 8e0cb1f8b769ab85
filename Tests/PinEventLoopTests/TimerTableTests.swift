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
}
