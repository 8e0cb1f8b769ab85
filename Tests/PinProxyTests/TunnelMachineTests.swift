import XCTest

@testable import PinProxy

/// A tunnel listener's logic before the splice: no sockets.
final class TunnelMachineTests: XCTestCase {
  func testWhatTheClientSendsBeforeTheUpstreamIsReadyIsHandedToTheSplice() {
    var machine = TunnelMachine()
    XCTAssertNil(machine.clientRead(Array("EHLO".utf8)))
    machine.clientEOF()
    XCTAssertEqual(machine.upstreamReady(), .splice(early: Array("EHLO".utf8), clientFinished: true))
    XCTAssertEqual(machine.upstreamReady(), .discardUpstream, "a second upstream is never spliced")
  }

  func testReadingStopsOnceTheEarlyBytesReachTheLimit() {
    var machine = TunnelMachine()
    XCTAssertNil(machine.clientRead([UInt8](repeating: 1, count: TunnelMachine.earlyLimit)))
    XCTAssertEqual(machine.clientRead([1]), .pauseClient)
  }

  func testASilentClientIsClosedAndEvictableButOneThatSpokeIsNot() {
    var silent = TunnelMachine()
    XCTAssertTrue(silent.isEvictable)
    XCTAssertEqual(silent.clientSilent(), .close)
    XCTAssertFalse(silent.isEvictable, "closed already")

    var spoke = TunnelMachine()
    _ = spoke.clientRead([0x16])
    XCTAssertNil(spoke.clientSilent())
    XCTAssertNil(spoke.drain(), "a tunnel in use runs until the drain deadline")
    XCTAssertFalse(spoke.isEvictable)
  }

  func testAnUpstreamThatArrivesAfterTheClientLeftIsDiscarded() {
    var machine = TunnelMachine()
    machine.clientClosed()
    XCTAssertEqual(machine.upstreamReady(), .discardUpstream)
  }
}

/// Many small reads before the upstream is ready: every byte is kept, in
/// order, and reading pauses exactly when the limit is passed.
final class TunnelMachineEarlyBytesTests: XCTestCase {
  func testManySmallReadsAreKeptExactly() {
    var machine = TunnelMachine()
    var expected: [UInt8] = []
    var pausedAt: Int?
    var reads = 0
    // Reads of 1 to 7 bytes, each from a buffer reused (and scribbled
    // over) afterwards, until just past the limit.
    let reused = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 1)
    defer { reused.deallocate() }
    while expected.count <= TunnelMachine.earlyLimit + 16 {
      let size = reads % 7 + 1
      let piece = (0..<size).map { UInt8(truncatingIfNeeded: expected.count + $0 * 31 + reads) }
      piece.withUnsafeBytes { reused.copyMemory(from: $0) }
      let action = machine.clientRead(UnsafeRawBufferPointer(rebasing: reused[..<size]))
      reused.initializeMemory(as: UInt8.self, repeating: 0)
      expected += piece
      reads += 1
      if action == .pauseClient, pausedAt == nil { pausedAt = expected.count }
      if expected.count <= TunnelMachine.earlyLimit { XCTAssertNil(action, "at \(expected.count) bytes") }
    }
    XCTAssertGreaterThan(reads, 60_000)
    XCTAssertNotNil(pausedAt)
    XCTAssertGreaterThan(pausedAt ?? 0, TunnelMachine.earlyLimit)
    XCTAssertLessThanOrEqual(pausedAt ?? .max, TunnelMachine.earlyLimit + 7)
    machine.clientEOF()
    XCTAssertEqual(machine.upstreamReady(), .splice(early: expected, clientFinished: true))
  }

  func testReadsAfterTheSpliceAreNotKept() {
    var machine = TunnelMachine()
    XCTAssertNil(machine.clientRead(Array("abc".utf8)))
    XCTAssertEqual(machine.upstreamReady(), .splice(early: Array("abc".utf8), clientFinished: false))
    XCTAssertNil(machine.clientRead(Array("def".utf8)))
    XCTAssertEqual(machine.upstreamReady(), .discardUpstream)
  }
}
