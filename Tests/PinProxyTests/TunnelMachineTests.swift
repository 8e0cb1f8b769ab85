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
