import Foundation
import Glibc
import XCTest

@testable import PinEventLoop

/// The sock_diag request and answer (`SockDiagMessage`, pure) byte for
/// byte and under random input, and `SockDiagSocket` against the real
/// kernel: the owner of a connected socket on 127.0.0.1 and ::1 is this
/// process's user with that socket's inode; a socket that is gone is unknown.
final class SockDiagTests: XCTestCase {
  let tuple = SocketTuple(
    source: [127, 0, 0, 1], sourcePort: 40001, destination: [127, 0, 0, 2], destinationPort: 3128)

  func testTheRequestNamesExactlyOneTCPSocket() {
    let bytes = SockDiagMessage.request(tuple, sequence: 7)
    XCTAssertEqual(bytes.count, 72)
    XCTAssertEqual(Array(bytes[0..<4]), [72, 0, 0, 0])  // nlmsg_len
    XCTAssertEqual(Array(bytes[4..<8]), [20, 0, 1, 0])  // SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST
    XCTAssertEqual(Array(bytes[8..<12]), [7, 0, 0, 0])  // sequence
    XCTAssertEqual(Array(bytes[16..<18]), [2, 6])  // AF_INET, IPPROTO_TCP
    XCTAssertEqual(Array(bytes[24..<28]), [0x9c, 0x41, 0x0c, 0x38])  // ports in network order
    XCTAssertEqual(Array(bytes[28..<32]), [127, 0, 0, 1])
    XCTAssertEqual(Array(bytes[44..<48]), [127, 0, 0, 2])
    XCTAssertEqual(Array(bytes[64..<72]), Array(repeating: 0xff, count: 8))  // INET_DIAG_NOCOOKIE
    let v6 = SockDiagMessage.request(
      SocketTuple(
        source: Array(repeating: 0, count: 15) + [1], sourcePort: 1,
        destination: [0xfe] + Array(repeating: 0, count: 15), destinationPort: 2),
      sequence: 1)
    XCTAssertEqual(v6[16], 10)  // AF_INET6
    XCTAssertEqual(v6[43], 1)
    XCTAssertEqual(v6[44], 0xfe)
  }

  /// An answer as the kernel writes it for `tuple`.
  func answer(
    sequence: UInt32, state: UInt8 = 1, uid: UInt32 = 1000, inode: UInt32 = 4242, tuple: SocketTuple? = nil
  )
    -> [UInt8]
  {
    let tuple = tuple ?? self.tuple
    var bytes = [UInt8](repeating: 0, count: 88)
    bytes.withUnsafeMutableBytes { raw in
      raw.storeBytes(of: UInt32(88), toByteOffset: 0, as: UInt32.self)
      raw.storeBytes(of: UInt16(20), toByteOffset: 4, as: UInt16.self)
      raw.storeBytes(of: sequence, toByteOffset: 8, as: UInt32.self)
      raw.storeBytes(of: uid, toByteOffset: 80, as: UInt32.self)
      raw.storeBytes(of: inode, toByteOffset: 84, as: UInt32.self)
    }
    bytes[16] = 2
    bytes[17] = state
    bytes[20] = UInt8(tuple.sourcePort >> 8)
    bytes[21] = UInt8(tuple.sourcePort & 0xff)
    bytes[22] = UInt8(tuple.destinationPort >> 8)
    bytes[23] = UInt8(tuple.destinationPort & 0xff)
    for (index, byte) in tuple.source.enumerated() { bytes[24 + index] = byte }
    for (index, byte) in tuple.destination.enumerated() { bytes[40 + index] = byte }
    return bytes
  }

  func decode(_ bytes: [UInt8], sequence: UInt32 = 7) -> SockDiagMessage.Answer {
    bytes.withUnsafeBytes { SockDiagMessage.decodeAnswer($0, sequence: sequence, tuple: tuple) }
  }

  func testTheAnswerGivesTheOwnerOfThatVerySocketOnly() {
    XCTAssertEqual(decode(answer(sequence: 7)), .owner(SocketOwner(uid: 1000, inode: 4242)))
    // Another socket's answer (the kernel falls back to a listener by port).
    var other = tuple
    other.sourcePort = 40002
    XCTAssertEqual(decode(answer(sequence: 7, tuple: other)), .absent)
    // A TIME_WAIT (6) socket has no owner; uid 0 there is not root. A
    // LISTEN (10) one is the kernel's fallback: the very socket is not here.
    XCTAssertEqual(decode(answer(sequence: 7, state: 6, uid: 0)), .unknown)
    XCTAssertEqual(decode(answer(sequence: 7, state: 10)), .absent)
    // An orphaned socket (its process closed it): no inode, no owner.
    XCTAssertEqual(decode(answer(sequence: 7, inode: 0)), .unknown)
    // A stale answer of an earlier request is skipped, then ours is read.
    XCTAssertEqual(decode(answer(sequence: 6)), .unrelated)
    XCTAssertEqual(
      decode(answer(sequence: 6) + answer(sequence: 7)), .owner(SocketOwner(uid: 1000, inode: 4242)))
  }

  func testNoSuchSocketIsAbsentAndAnyOtherErrorOrATruncatedAnswerIsUnknown() {
    var error = [UInt8](repeating: 0, count: 36)
    error.withUnsafeMutableBytes { raw in
      raw.storeBytes(of: UInt32(36), toByteOffset: 0, as: UInt32.self)
      raw.storeBytes(of: UInt16(2), toByteOffset: 4, as: UInt16.self)  // NLMSG_ERROR
      raw.storeBytes(of: UInt32(7), toByteOffset: 8, as: UInt32.self)
      raw.storeBytes(of: Int32(-ENOENT), toByteOffset: 16, as: Int32.self)
    }
    XCTAssertEqual(decode(error), .absent)
    error.withUnsafeMutableBytes { $0.storeBytes(of: Int32(-EPERM), toByteOffset: 16, as: Int32.self) }
    XCTAssertEqual(decode(error), .unknown)
    // An error too short to carry its code is not taken for "absent".
    var short = Array(error.prefix(16))
    short.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(16), toByteOffset: 0, as: UInt32.self) }
    XCTAssertEqual(decode(short), .unknown)
    let full = answer(sequence: 7)
    for cut in [1, 15, 16, 40, 87] { XCTAssertEqual(decode(Array(full.prefix(cut))), .unknown, "cut \(cut)") }
    // A length field past the datagram, or below a header.
    var lying = full
    lying[0] = 200
    XCTAssertEqual(decode(lying), .unknown)
    lying[0] = 8
    XCTAssertEqual(decode(lying), .unknown)
  }

  /// Random datagrams, and valid answers with random bytes flipped, never
  /// trap and never yield an owner for another socket.
  func testRandomAnswersNeverTrap() {
    var generator = SystemRandomNumberGenerator()
    let valid = answer(sequence: 7)
    for round in 0..<20_000 {
      var bytes: [UInt8]
      if round % 2 == 0 {
        bytes = (0..<Int.random(in: 0...300, using: &generator)).map { _ in
          UInt8.random(in: 0...255, using: &generator)
        }
      } else {
        bytes = valid
        for _ in 0..<Int.random(in: 1...4, using: &generator) {
          bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(
            in: 0...255, using: &generator)
        }
      }
      if case .owner = decode(bytes) {
        // Only an intact id can name the owner.
        XCTAssertEqual(Array(bytes[20..<28]), Array(valid[20..<28]))
        XCTAssertEqual(Array(bytes[40..<44]), Array(valid[40..<44]))
      }
    }
  }

  // MARK: The real kernel

  /// A listener, a connected client and the accepted socket, on `host`.
  func connectedPair(_ host: String) throws -> (client: Int32, accepted: Int32, listener: Int32) {
    let family = host.contains(":") ? AF_INET6 : AF_INET
    let address = try XCTUnwrap(SocketAddress(ip: host, port: 0))
    let listener = socket(family, Int32(SOCK_STREAM.rawValue), 0)
    XCTAssertEqual(address.withSockaddr { bind(listener, $0, $1) }, 0)
    XCTAssertEqual(listen(listener, 4), 0)
    let bound = try XCTUnwrap(SocketAddress.local(of: listener))
    let client = socket(family, Int32(SOCK_STREAM.rawValue), 0)
    XCTAssertEqual(bound.withSockaddr { connect(client, $0, $1) }, 0)
    let accepted = accept(listener, nil, nil)
    XCTAssertGreaterThanOrEqual(accepted, 0)
    return (client, accepted, listener)
  }

  /// The tuple of the client's socket, as pinproxy builds it from the accepted one.
  func peerTuple(of accepted: Int32) throws -> SocketTuple {
    let here = try XCTUnwrap(SocketAddress.local(of: accepted))
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(accepted, $0, &length) }
    }
    let peer = SocketAddress(storage: storage, length: length)
    return SocketTuple(
      source: peer.addressBytes, sourcePort: UInt16(peer.port), destination: here.addressBytes,
      destinationPort: UInt16(here.port))
  }

  func inode(of fd: Int32) -> UInt32 {
    var status = stat()
    XCTAssertEqual(fstat(fd, &status), 0)
    return UInt32(truncatingIfNeeded: status.st_ino)
  }

  func testTheKernelNamesThisProcessAsTheOwnerOfALoopbackClient() throws {
    let diag = try XCTUnwrap(SockDiagSocket(), "NETLINK_SOCK_DIAG is not available")
    for host in ["127.0.0.1", "::1"] {
      let (client, accepted, listener) = try connectedPair(host)
      defer { [client, accepted, listener].forEach { _ = close($0) } }
      let owner = try XCTUnwrap(diag.owner(of: try peerTuple(of: accepted)), host)
      XCTAssertEqual(owner, SocketOwner(uid: getuid(), inode: inode(of: client)), host)
      // The accepted socket's own tuple is another socket (ours, on the server side).
      var reversed = try peerTuple(of: accepted)
      swap(&reversed.source, &reversed.destination)
      swap(&reversed.sourcePort, &reversed.destinationPort)
      XCTAssertEqual(diag.owner(of: reversed)?.inode, inode(of: accepted), host)
    }
  }

  /// A client that reset its connection before the lookup: unknown, not root.
  func testAClientGoneBeforeTheLookupIsUnknown() throws {
    let diag = try XCTUnwrap(SockDiagSocket())
    let (client, accepted, listener) = try connectedPair("127.0.0.1")
    defer { [accepted, listener].forEach { _ = close($0) } }
    let tuple = try peerTuple(of: accepted)
    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
    setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    close(client)
    XCTAssertNil(diag.owner(of: tuple))
    // Nor does a socket that never existed have an owner.
    var nothing = tuple
    nothing.sourcePort = nothing.sourcePort == 1 ? 2 : 1
    XCTAssertNil(diag.owner(of: nothing))
    // The kernel says so: this host has no such socket (a remote peer).
    XCTAssertEqual(diag.lookUp(nothing), .absent)
  }
}
