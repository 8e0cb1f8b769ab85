import PinEventLoop
import XCTest

@testable import PinProxy

/// `/status`'s requests and refusals by local program: a peer counts into
/// its program's cells, remembered after the first count, and goes back
/// through the program's key when the table let go of them to make room.
final class LocalProgramActivityTests: XCTestCase {
  private let minute: UInt64 = 60_000_000_000

  private func peer(program: String, uid: UInt32 = 1000) -> LocalPeer {
    let peer = LocalPeer(owner: SocketOwner(uid: uid, inode: 4242))
    peer.record(user: "app", program: program, pid: 7)
    return peer
  }

  private func requests(of program: String, in table: LocalProgramActivity, now: UInt64) -> Int? {
    table.top(LocalProgramActivity.maximumPrograms + 1, now: now).first { $0.program == program }?.requests
  }

  func testAPeersRequestsAndRefusalsAddUpUnderItsProgram() {
    let table = LocalProgramActivity()
    let curl = peer(program: "curl")
    for _ in 0..<5 { table.request(curl, now: 3 * minute) }
    table.refusal(curl, now: 3 * minute)
    let summary = table.top(10, now: 3 * minute).first
    XCTAssertEqual(summary, .init(user: "app", program: "curl", requests: 5, refusals: 1))
  }

  func testCountsMadeBeforeTheLookupAnsweredAreAddedWhenItDoes() {
    let table = LocalProgramActivity()
    let peer = LocalPeer(owner: SocketOwner(uid: 1000, inode: 4343))
    // Asked already: counting does not start a scan of /proc in the test.
    XCTAssertTrue(peer.markAsked())
    table.request(peer, now: minute)
    table.request(peer, now: minute)
    XCTAssertNil(requests(of: "pos-terminal", in: table, now: minute))
    peer.record(user: "app", program: "pos-terminal", pid: 9)
    XCTAssertEqual(requests(of: "pos-terminal", in: table, now: minute), 2)
    table.request(peer, now: minute)
    XCTAssertEqual(requests(of: "pos-terminal", in: table, now: minute), 3)
  }

  func testAPeerWhoseCellsWereLetGoCountsThroughItsProgramAgain() {
    let table = LocalProgramActivity()
    let old = peer(program: "old-app")
    table.request(old, now: minute)
    table.request(old, now: minute)  // into its remembered cells
    XCTAssertEqual(requests(of: "old-app", in: table, now: minute), 2)
    // A full table of programs busier since: old-app's cells are the
    // stalest, and the next program takes their place.
    for index in 0..<LocalProgramActivity.maximumPrograms {
      table.add(
        LocalProgramKey(uid: 1, program: "busy-\(index)"), user: "other", requests: 1, refusals: 0,
        now: 5 * minute)
    }
    XCTAssertNil(requests(of: "old-app", in: table, now: 5 * minute), "let go of to make room")
    // Its next request is counted, not lost in the cells let go of.
    table.request(old, now: 6 * minute)
    XCTAssertEqual(requests(of: "old-app", in: table, now: 6 * minute), 1)
    table.request(old, now: 6 * minute)
    XCTAssertEqual(requests(of: "old-app", in: table, now: 6 * minute), 2)
  }

  func testAPeerCountingIntoAnotherTableUsesThatTablesCells() {
    let (first, second) = (LocalProgramActivity(), LocalProgramActivity())
    let app = peer(program: "app")
    first.request(app, now: minute)
    second.request(app, now: minute)
    second.request(app, now: minute)
    XCTAssertEqual(requests(of: "app", in: first, now: minute), 1)
    XCTAssertEqual(requests(of: "app", in: second, now: minute), 2)
  }

  /// Without an admin endpoint the table is shown nowhere: a request counts
  /// nothing and starts no lookup of the client's program.
  func testATableNobodySeesCountsNothingAndAsksForNoLookup() {
    let hidden = LocalProgramActivity(shown: false)
    let known = peer(program: "app")
    hidden.request(known, now: minute)
    hidden.refusal(known, now: minute)
    XCTAssertEqual(hidden.top(10, now: minute), [])
    let unknown = LocalPeer(owner: SocketOwner(uid: 1000, inode: 4444))
    hidden.request(unknown, now: minute)
    XCTAssertTrue(unknown.markAsked(), "no lookup was asked for")
    XCTAssertFalse(unknown.isResolved)
    // The same peer counted where the table is shown asks for its lookup.
    let shown = LocalProgramActivity()
    let other = LocalPeer(owner: SocketOwner(uid: 1000, inode: 4545))
    XCTAssertTrue(other.markAsked())
    shown.request(other, now: minute)
    other.record(user: "app", program: "seen", pid: 3)
    XCTAssertEqual(requests(of: "seen", in: shown, now: minute), 1)
  }
}
