import PinEventLoop
import XCTest

@testable import PinProxy

/// The loop's shelf hands an ended session's acquirer to the next session
/// only for the same client under the same snapshot, once.
final class ForwardStorageShelfTests: XCTestCase {
  func testAnAcquirerIsHandedOnOnceAndOnlyForItsClientAndSnapshot() throws {
    let harness = try AcquirerHarness(originPort: 9)
    harness.onLoop {
      let shelf = ForwardStorageShelf()
      let kept = UpstreamAcquirer(
        context: harness.context, snapshot: harness.snapshot, loop: harness.loop,
        client: "127.0.0.0/8 uid 1000",
        connection: 7)
      shelf.acquirerMemo = (harness.snapshot.generation, kept)
      XCTAssertNil(shelf.takeAcquirer(client: "10.0.0.2", generation: harness.snapshot.generation))
      XCTAssertNil(
        shelf.takeAcquirer(client: "127.0.0.0/8 uid 1000", generation: harness.snapshot.generation + 1),
        "a reload's sessions dial under their own snapshot")
      XCTAssertNil(
        shelf.takeAcquirer(client: "127.0.0.0/8 uid 1001", generation: harness.snapshot.generation),
        "another user's budget is its own")
      let taken = shelf.takeAcquirer(client: "127.0.0.0/8 uid 1000", generation: harness.snapshot.generation)
      XCTAssertTrue(taken === kept)
      XCTAssertNil(
        shelf.takeAcquirer(client: "127.0.0.0/8 uid 1000", generation: harness.snapshot.generation),
        "taken once")
    }
  }
}
