import XCTest

@testable import PinEventLoop

#if canImport(Glibc)
  import Glibc
#endif

/// The queue keeps whole arrays by reference and copies reused buffers:
/// whatever the mix, and however the socket cuts the writes, the peer must
/// receive exactly the bytes written, in order.
final class OutputQueueTests: XCTestCase {
  /// A non-blocking socket pair with small buffers, so writes come up short.
  func makePair() throws -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
      // Never a skip: a test that cannot set up fails.
      throw SocketError(operation: "socketpair", code: errno)
    }
    var size: Int32 = 4096
    for fd in fds {
      _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
      _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
      _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }
    return (fds[0], fds[1])
  }

  func readAll(_ fd: Int32, into received: inout [UInt8]) {
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      guard count > 0 else { return }
      received += chunk[..<count]
    }
  }

  func testMixedPiecesArriveInOrderThroughShortWrites() throws {
    let (writer, reader) = try makePair()
    defer {
      close(writer)
      close(reader)
    }
    var queue = OutputQueue()
    var expected: [UInt8] = []
    let reused = UnsafeMutableRawBufferPointer.allocate(byteCount: 20_000, alignment: 1)
    defer { reused.deallocate() }
    // Large arrays (kept), small ones and reused buffers (copied), with the
    // first piece part-written as a direct write would leave it.
    let first = (0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    queue.append(first, from: 1200)
    expected += first[1200...]
    for round in 0..<40 {
      let size = [3, 900, 5000, 17_000, 1, 1024, 1025][round % 7]
      let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &+ round &* 13) }
      if round % 2 == 0 {
        queue.append(bytes)
      } else {
        bytes.withUnsafeBytes { reused.copyMemory(from: $0) }
        queue.append(UnsafeRawBufferPointer(rebasing: reused[..<size]))
        reused.initializeMemory(as: UInt8.self, repeating: 0xee)
      }
      expected += bytes
    }
    XCTAssertEqual(queue.count, expected.count)
    var received: [UInt8] = []
    var writes = 0
    while !queue.isEmpty {
      let before = queue.count
      let written = queue.write(to: writer)
      if written < 0 {
        XCTAssertTrue(errno == EAGAIN || errno == EWOULDBLOCK, "errno \(errno)")
      } else {
        XCTAssertEqual(queue.count, before - written)
        writes += 1
      }
      readAll(reader, into: &received)
    }
    XCTAssertGreaterThan(writes, 10, "the small socket buffer cut the writes")
    XCTAssertEqual(received.count, expected.count)
    XCTAssertTrue(received == expected, "bytes differ or arrive out of order")
  }

  func testAnArrayChangedAfterQueueingIsSentAsItWas() throws {
    let (writer, reader) = try makePair()
    defer {
      close(writer)
      close(reader)
    }
    var queue = OutputQueue()
    var bytes = [UInt8](repeating: 1, count: 3000)
    queue.append(bytes)
    bytes[0] = 9
    bytes.append(9)
    var received: [UInt8] = []
    while !queue.isEmpty {
      _ = queue.write(to: writer)
      readAll(reader, into: &received)
    }
    XCTAssertEqual(received, [UInt8](repeating: 1, count: 3000))
  }

  func testRemoveAllEmptiesTheQueue() {
    var queue = OutputQueue()
    queue.append([UInt8](repeating: 2, count: 4000))
    queue.append([7, 8])
    queue.removeAll()
    XCTAssertTrue(queue.isEmpty)
    XCTAssertEqual(queue.count, 0)
  }
}
