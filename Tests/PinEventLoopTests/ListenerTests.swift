import Dispatch
import Foundation
import XCTest

@testable import PinEventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// Each loop accepts its own connections on a listening socket of its own
/// (`SO_REUSEPORT`), and serves them there; a port another socket holds is
/// refused, not shared.
final class ListenerTests: XCTestCase {
  /// Blocking connects from this thread, each from a new source port.
  func connectMany(_ count: Int, to address: SocketAddress) -> [Int32] {
    (0..<count).compactMap { _ in
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
      let connected = address.withSockaddr { Glibc.connect(fd, $0, $1) } == 0
      if !connected { close(fd) }
      return connected ? fd : nil
    }
  }

  func testEveryLoopAcceptsOnItsOwnQueueAndBothTakeTheirShare() throws {
    let group = EventLoopGroup(count: 2)
    let lock = NSLock()
    nonisolated(unsafe) var acceptedOn: [Int: Int] = [:]
    nonisolated(unsafe) var offLoop = 0
    let listener = try Listener(address: SocketAddress(ip: "127.0.0.1", port: 0)!, group: group) {
      fd, _, loop in
      let index = group.loops.firstIndex { $0 === loop } ?? -1
      lock.withLock {
        acceptedOn[index, default: 0] += 1
        if !loop.inLoop { offLoop += 1 }
      }
      close(fd)
    }
    defer { listener.close() }
    XCTAssertNotEqual(listener.address.port, 0, "port 0 became one port for every loop")
    let clients = connectMany(128, to: listener.address)
    defer { clients.forEach { close($0) } }
    XCTAssertEqual(clients.count, 128)
    let deadline = Date().addingTimeInterval(10)
    while lock.withLock({ acceptedOn.values.reduce(0, +) }) < 128 && Date() < deadline { usleep(10_000) }
    lock.withLock {
      XCTAssertEqual(acceptedOn.values.reduce(0, +), 128, "\(acceptedOn)")
      XCTAssertEqual(offLoop, 0, "a connection is handed to its loop on that loop's own queue")
      // The kernel spreads connections over the sockets by their addresses:
      // with 128 source ports, each loop takes some.
      XCTAssertGreaterThan(acceptedOn[0] ?? 0, 0, "\(acceptedOn)")
      XCTAssertGreaterThan(acceptedOn[1] ?? 0, 0, "\(acceptedOn)")
    }
  }

  func testAPortAnotherSocketHoldsIsReportedInUseNotShared() throws {
    let group = EventLoopGroup(count: 2)
    // Another process's listener, without SO_REUSEPORT.
    let other = try Socket.listen(on: SocketAddress(ip: "127.0.0.1", port: 0)!, reusePort: false)
    defer { close(other) }
    let taken = try XCTUnwrap(Socket.localAddress(other))
    XCTAssertThrowsError(try Listener(address: taken, group: group) { fd, _, _ in close(fd) }) { error in
      XCTAssertEqual((error as? SocketError)?.code, EADDRINUSE, "\(error)")
    }
    // Another pinproxy's listener, with it: still refused.
    let first = try Listener(address: SocketAddress(ip: "127.0.0.1", port: 0)!, group: group) { fd, _, _ in
      close(fd)
    }
    defer { first.close() }
    XCTAssertThrowsError(try Listener(address: first.address, group: group) { fd, _, _ in close(fd) }) {
      XCTAssertEqual(($0 as? SocketError)?.code, EADDRINUSE, "\($0)")
    }
  }

  func testPauseStopsEveryLoopAcceptingAndResumeTakesTheBacklog() throws {
    let group = EventLoopGroup(count: 2)
    let lock = NSLock()
    nonisolated(unsafe) var accepted = 0
    let listener = try Listener(address: SocketAddress(ip: "127.0.0.1", port: 0)!, group: group) {
      fd, _, _ in
      lock.withLock { accepted += 1 }
      close(fd)
    }
    defer { listener.close() }
    listener.pause()
    // The pause is queued on each loop; wait until both ran it.
    for loop in group.loops { loop.runAndWait {} }
    let clients = connectMany(16, to: listener.address)
    defer { clients.forEach { close($0) } }
    XCTAssertEqual(clients.count, 16, "connections wait in the kernel's backlog")
    usleep(200_000)
    XCTAssertEqual(lock.withLock { accepted }, 0, "no loop accepts while paused")
    listener.resume()
    let deadline = Date().addingTimeInterval(10)
    while lock.withLock({ accepted }) < 16 && Date() < deadline { usleep(10_000) }
    XCTAssertEqual(lock.withLock { accepted }, 16)
  }
}
