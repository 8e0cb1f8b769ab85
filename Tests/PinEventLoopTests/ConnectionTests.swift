import Dispatch
import Foundation
import PinEventLoop
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// Records what a connection reports, for assertions from the test thread.
final class Recorder: ChannelDelegate, @unchecked Sendable {
  let lock = NSLock()
  var received: [UInt8] = []
  var eof = false
  var drains = 0
  var closed = false
  var onRead: ((Connection, [UInt8]) -> Void)?
  var onEOF: ((Connection) -> Void)?

  /// Copies the read: the buffer is the loop's, reused by the next read.
  func channel(_ channel: any ByteChannel, didReadBuffer buffer: UnsafeRawBufferPointer) {
    let bytes = Array(buffer)
    lock.withLock { received += bytes }
    if let connection = channel as? Connection { onRead?(connection, bytes) }
  }
  func channelDidReadEOF(_ channel: any ByteChannel) {
    lock.withLock { eof = true }
    if let connection = channel as? Connection { onEOF?(connection) }
  }
  func channelDidDrain(_ channel: any ByteChannel) { lock.withLock { drains += 1 } }
  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) { lock.withLock { closed = true } }

  func wait(_ timeout: Double = 5, until condition: (Recorder) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if lock.withLock({ condition(self) }) { return true }
      usleep(2_000)
    }
    return false
  }
}

final class ConnectionTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  /// A listener whose accepted connections echo, and a client connected to it.
  func makePair(
    group: EventLoopGroup, serverDelegate: Recorder,
    configure: @escaping @Sendable (Connection) -> Void = { _ in }
  ) throws -> (Listener, Connection, Recorder) {
    nonisolated(unsafe) var accepted: [Connection] = []
    let listener = try Listener(address: SocketAddress(ip: "127.0.0.1", port: 0)!, group: group) {
      fd, peer, loop in
      let connection = Connection(fd: fd, peer: peer.description, loop: loop)
      connection.delegate = serverDelegate
      connection.resumeReading()
      configure(connection)
      accepted.append(connection)
    }
    let loop = group.next()
    let clientRecorder = Recorder()
    let connected = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var client: Connection?
    loop.execute {
      Connector.connect(to: [listener.address], on: loop, timeout: 5) { result in
        if case .success(let fd) = result {
          client = Connection(fd: fd, peer: "server", loop: loop)
          client?.delegate = clientRecorder
          client?.resumeReading()
        }
        connected.signal()
      }
    }
    connected.wait()
    return (listener, try XCTUnwrap(client), clientRecorder)
  }

  func testEchoAndOrderlyClose() throws {
    let group = EventLoopGroup(count: 2)
    let server = Recorder()
    server.onRead = { connection, bytes in connection.write(bytes) }
    server.onEOF = { connection in connection.closeAfterFlush() }
    let (listener, client, recorder) = try makePair(group: group, serverDelegate: server)
    defer { listener.close() }
    let message = (0..<200_000).map { UInt8(truncatingIfNeeded: $0) }
    client.loop.execute {
      client.write(message)
      client.shutdownOutput()
    }
    let complete = recorder.wait { $0.received.count == message.count && $0.eof }
    XCTAssertTrue(
      complete,
      "received \(recorder.received.count) of \(message.count), eof \(recorder.eof), server got \(server.received.count), server eof \(server.eof), server closed \(server.closed), client closed \(recorder.closed)"
    )
    XCTAssertTrue(recorder.received == message, "echoed bytes differ")
    XCTAssertTrue(server.wait { $0.closed })
    client.loop.execute { client.close() }
    XCTAssertTrue(recorder.wait { $0.closed })
    XCTAssertEqual(fcntl(client.fd, F_GETFD), -1, "the fd is closed after close")
  }

  /// Independent of the kernel's buffer sysctls (loopback may autotune to
  /// 32 MiB): both sockets get small fixed buffers, and the writer sends
  /// several times what the kernel actually granted.
  func testHighWatermarkThenDrainWhenTheReaderCatchesUp() throws {
    let group = EventLoopGroup(count: 2)
    let server = Recorder()
    nonisolated(unsafe) var serverConnection: Connection?
    let accepted = DispatchSemaphore(value: 0)
    let (listener, client, recorder) = try makePair(group: group, serverDelegate: server) { connection in
      connection.pauseReading()  // a slow reader: nothing is read until resumed
      ConnectionTests.setBuffer(connection.fd, SO_RCVBUF, 64 * 1024)
      serverConnection = connection
      accepted.signal()
    }
    defer { listener.close() }
    XCTAssertEqual(accepted.wait(timeout: .now() + 5), .success)
    let reader = try XCTUnwrap(serverConnection)
    let aboveHigh = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var wasAbove = false
    nonisolated(unsafe) var total = 0
    client.loop.execute {
      ConnectionTests.setBuffer(client.fd, SO_SNDBUF, 64 * 1024)
      let granted =
        ConnectionTests.buffer(client.fd, SO_SNDBUF) + ConnectionTests.buffer(reader.fd, SO_RCVBUF)
      client.highWatermark = 64 * 1024
      client.lowWatermark = 16 * 1024
      let chunks = max(16, 4 * granted / (64 * 1024) + 4)
      for _ in 0..<chunks { client.write([UInt8](repeating: 1, count: 64 * 1024)) }
      total = chunks * 64 * 1024
      wasAbove = client.isAboveHighWatermark
      aboveHigh.signal()
    }
    aboveHigh.wait()
    XCTAssertTrue(wasAbove, "\(total) bytes to a reader that reads nothing must exceed the socket buffers")
    XCTAssertEqual(recorder.drains, 0)
    reader.loop.execute { reader.resumeReading() }
    XCTAssertTrue(recorder.wait { $0.drains == 1 })
    XCTAssertTrue(server.wait { $0.received.count == total })
  }

  /// Corked writes wait in the queue and leave together on `uncork`; a
  /// close asked for meanwhile happens after them.
  func testCorkedWritesLeaveTogetherOnUncork() throws {
    let group = EventLoopGroup(count: 1)
    let server = Recorder()
    let (listener, client, _) = try makePair(group: group, serverDelegate: server)
    defer { listener.close() }
    nonisolated(unsafe) var heldBack = -1
    nonisolated(unsafe) var writeInterest = true
    let done = DispatchSemaphore(value: 0)
    client.loop.execute {
      client.cork()
      client.write(Array("head|".utf8))
      client.write(Array("body|".utf8))
      client.closeAfterFlush()
      heldBack = client.pendingOutputBytes
      writeInterest = client.isOpen == false
      client.uncork()
      done.signal()
    }
    done.wait()
    XCTAssertEqual(heldBack, 10, "nothing is written while corked")
    XCTAssertFalse(writeInterest, "closeAfterFlush waits for the corked bytes")
    XCTAssertTrue(server.wait { String(decoding: $0.received, as: UTF8.self) == "head|body|" && $0.eof })
  }

  static func setBuffer(_ fd: Int32, _ option: Int32, _ size: Int32) {
    var value = size
    setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<Int32>.size))
  }

  static func buffer(_ fd: Int32, _ option: Int32) -> Int {
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    getsockopt(fd, SOL_SOCKET, option, &value, &length)
    return Int(value)
  }

  func testConnectToAClosedPortFailsFast() {
    let loop = EventLoop(name: "test")
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var failure: Connector.Failure?
    loop.execute {
      Connector.connect(to: [SocketAddress(ip: "127.0.0.1", port: 1)!], on: loop, timeout: 5) { result in
        if case .failure(let error) = result { failure = error }
        done.signal()
      }
    }
    XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
    guard case .refused(let message)? = failure else { return XCTFail("expected refused") }
    XCTAssertTrue(message.contains("refused"), message)
  }

  func testResolverAnswersOnTheLoopForNamesAndLiterals() {
    let loop = EventLoop(name: "resolver")
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var results: [String] = []
    for host in ["localhost", "::1"] {
      Resolver.resolve(host: host, port: 8080, on: loop) { result in
        loop.preconditionInLoop()
        if case .success(let addresses) = result { results.append(addresses.map(\.description).joined()) }
        done.signal()
      }
    }
    done.wait()
    done.wait()
    XCTAssertEqual(results.count, 2)
    XCTAssertTrue(results.contains("[::1]:8080"), "\(results)")
  }

  func testTimerFiresOnceAndCancelledTimerDoesNot() {
    let loop = EventLoop(name: "timers")
    let fired = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var cancelledFired = false
    let timer = loop.schedule(after: 0.05) { fired.signal() }
    let cancelled = loop.schedule(after: 0.05) { cancelledFired = true }
    cancelled.cancel()
    XCTAssertEqual(fired.wait(timeout: .now() + 2), .success)
    usleep(100_000)
    XCTAssertFalse(cancelledFired)
    _ = timer
  }
}
