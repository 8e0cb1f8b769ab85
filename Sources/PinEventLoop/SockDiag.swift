/// Who owns a TCP socket of this host, as the kernel's socket tables say:
/// what `ss -tep` shows as `uid:` and `ino:`.
public struct SocketOwner: Sendable, Equatable {
  public let uid: UInt32
  public let inode: UInt32

  public init(uid: UInt32, inode: UInt32) {
    self.uid = uid
    self.inode = inode
  }
}

/// One TCP socket named by its exact 4-tuple, from the point of view of
/// the socket itself: `source` is its own address and port, `destination`
/// its remote one. Addresses are 4 (IPv4) or 16 (IPv6) bytes.
public struct SocketTuple: Sendable, Equatable {
  public var source: IPBytes
  public var sourcePort: UInt16
  public var destination: IPBytes
  public var destinationPort: UInt16

  public init(source: IPBytes, sourcePort: UInt16, destination: IPBytes, destinationPort: UInt16) {
    self.source = source
    self.sourcePort = sourcePort
    self.destination = destination
    self.destinationPort = destinationPort
  }

  public init(source: [UInt8], sourcePort: UInt16, destination: [UInt8], destinationPort: UInt16) {
    self.init(
      source: IPBytes(source), sourcePort: sourcePort, destination: IPBytes(destination),
      destinationPort: destinationPort)
  }

  var isIPv4: Bool { source.count == 4 }
}

/// The bytes of one `SOCK_DIAG_BY_FAMILY` request for exactly one TCP
/// socket, and the reading of the kernel's answer (linux/inet_diag.h,
/// linux/sock_diag.h, man 7 sock_diag). Pure: no I/O, so both directions
/// are unit-tested and fuzzed. Netlink headers and `inet_diag` integers are
/// in host order; ports and addresses in `inet_diag_sockid` in network order.
public enum SockDiagMessage {
  /// `struct nlmsghdr`.
  static let headerBytes = 16
  /// `struct inet_diag_req_v2`.
  static let requestBodyBytes = 56
  /// `struct inet_diag_msg`.
  static let answerBodyBytes = 72
  public static let requestBytes = headerBytes + requestBodyBytes
  static let sockDiagByFamily: UInt16 = 20
  static let netlinkError: UInt16 = 2
  static let netlinkDone: UInt16 = 3
  static let requestFlag: UInt16 = 1
  static let familyIPv4: UInt8 = 2
  static let familyIPv6: UInt8 = 10
  static let protocolTCP: UInt8 = 6
  static let listenState: UInt8 = 10
  /// `ENOENT`: the kernel's answer when no socket has the 4-tuple.
  static let noSuchEntry: Int32 = 2

  /// TCP states (include/net/tcp_states.h) whose owner is the process's:
  /// a TIME_WAIT or request socket has no owner (the kernel reports uid 0,
  /// which would read as root), a listener is another socket altogether.
  static let ownedStates: Set<UInt8> = [
    1,  // ESTABLISHED
    2,  // SYN_SENT
    4, 5,  // FIN_WAIT1, FIN_WAIT2
    8, 9, 11,  // CLOSE_WAIT, LAST_ACK, CLOSING
  ]

  /// Writes the request for `tuple` into `buffer` (at least `requestBytes`).
  public static func encodeRequest(
    _ tuple: SocketTuple, sequence: UInt32, into buffer: UnsafeMutableRawBufferPointer
  ) {
    precondition(buffer.count >= requestBytes)
    for index in 0..<requestBytes { buffer[index] = 0 }
    buffer.storeBytes(of: UInt32(requestBytes), toByteOffset: 0, as: UInt32.self)
    buffer.storeBytes(of: sockDiagByFamily, toByteOffset: 4, as: UInt16.self)
    buffer.storeBytes(of: requestFlag, toByteOffset: 6, as: UInt16.self)
    buffer.storeBytes(of: sequence, toByteOffset: 8, as: UInt32.self)
    // inet_diag_req_v2: family, protocol, ext, pad, states.
    buffer[16] = tuple.isIPv4 ? familyIPv4 : familyIPv6
    buffer[17] = protocolTCP
    buffer.storeBytes(of: UInt32.max, toByteOffset: 20, as: UInt32.self)
    writeSocketID(tuple, into: buffer, at: 24)
    // idiag_if stays 0; idiag_cookie is INET_DIAG_NOCOOKIE (~0, twice).
    buffer.storeBytes(of: UInt32.max, toByteOffset: 64, as: UInt32.self)
    buffer.storeBytes(of: UInt32.max, toByteOffset: 68, as: UInt32.self)
  }

  /// The request as an array (tests and the fuzzer).
  public static func request(_ tuple: SocketTuple, sequence: UInt32) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: requestBytes)
    bytes.withUnsafeMutableBytes { encodeRequest(tuple, sequence: sequence, into: $0) }
    return bytes
  }

  /// `inet_diag_sockid`: sport, dport (network order), src, dst (16 bytes each).
  private static func writeSocketID(
    _ tuple: SocketTuple, into buffer: UnsafeMutableRawBufferPointer, at offset: Int
  ) {
    buffer[offset] = UInt8(tuple.sourcePort >> 8)
    buffer[offset + 1] = UInt8(tuple.sourcePort & 0xff)
    buffer[offset + 2] = UInt8(tuple.destinationPort >> 8)
    buffer[offset + 3] = UInt8(tuple.destinationPort & 0xff)
    for (index, byte) in tuple.source.prefix(16).enumerated() { buffer[offset + 4 + index] = byte }
    for (index, byte) in tuple.destination.prefix(16).enumerated() { buffer[offset + 20 + index] = byte }
  }

  /// What one read from the socket said about the request `sequence`.
  public enum Answer: Equatable, Sendable {
    /// The socket, owned by a process.
    case owner(SocketOwner)
    /// The socket is there but has no owner to tell (TIME_WAIT, orphaned
    /// by its process), or the answer cannot be read: the peer is on this
    /// host, its user unknown.
    case unknown
    /// The kernel has no socket with this 4-tuple (`ENOENT`, or it fell
    /// back to a listener or another socket): the peer is not a socket of
    /// this host's network namespace.
    case absent
    /// Nothing in these bytes answers `sequence` (a stale answer of an
    /// earlier request): read again.
    case unrelated
  }

  /// Reads `bytes` (one datagram) for the answer to `sequence` about
  /// `tuple`. Every length is checked against what is there; a malformed
  /// datagram is `unknown`, never a guess.
  public static func decodeAnswer(_ bytes: UnsafeRawBufferPointer, sequence: UInt32, tuple: SocketTuple)
    -> Answer
  {
    var offset = 0
    while bytes.count - offset >= headerBytes {
      let length = Int(load(UInt32.self, bytes, offset))
      guard length >= headerBytes, length <= bytes.count - offset else { return .unknown }
      let type = load(UInt16.self, bytes, offset + 4)
      let answered = load(UInt32.self, bytes, offset + 8)
      if answered == sequence {
        if type == netlinkError, length >= headerBytes + 4,
          load(Int32.self, bytes, offset + headerBytes) == -noSuchEntry
        {
          return .absent
        }
        guard type == sockDiagByFamily, length >= headerBytes + answerBodyBytes else { return .unknown }
        return owner(bytes, at: offset + headerBytes, tuple: tuple)
      }
      if type == netlinkDone || type == netlinkError || type == sockDiagByFamily {
        // Another request's answer: skip it. Netlink aligns messages to 4.
        offset += (length + 3) & ~3
        continue
      }
      return .unknown
    }
    return offset == 0 && bytes.count > 0 ? .unknown : .unrelated
  }

  /// `inet_diag_msg`: family, state, timer, retrans, the socket id, then
  /// expires, rqueue, wqueue, uid, inode.
  private static func owner(_ bytes: UnsafeRawBufferPointer, at body: Int, tuple: SocketTuple) -> Answer {
    let family = bytes[body]
    let state = bytes[body + 1]
    // A dual-stack IPv6 socket with v4-mapped addresses is found by an IPv4
    // query too: not the socket asked about; its IPv6 query finds it.
    guard family == (tuple.isIPv4 ? familyIPv4 : familyIPv6) else { return .absent }
    // A listener is what the kernel falls back to when the very socket is not there.
    if state == listenState { return .absent }
    guard ownedStates.contains(state) else { return .unknown }
    // The kernel looks up by the 4-tuple but may fall back to a listener:
    // only the very socket asked about counts.
    let id = body + 4
    let sourcePort = UInt16(bytes[id]) << 8 | UInt16(bytes[id + 1])
    let destinationPort = UInt16(bytes[id + 2]) << 8 | UInt16(bytes[id + 3])
    let width = tuple.source.count
    guard sourcePort == tuple.sourcePort, destinationPort == tuple.destinationPort,
      (0..<width).allSatisfy({ bytes[id + 4 + $0] == tuple.source[$0] }),
      (0..<width).allSatisfy({ bytes[id + 20 + $0] == tuple.destination[$0] })
    else { return .absent }
    let uid = load(UInt32.self, bytes, body + 64)
    let inode = load(UInt32.self, bytes, body + 68)
    // An orphaned socket (its process closed it) has no inode and no owner.
    guard inode != 0 else { return .unknown }
    return .owner(SocketOwner(uid: uid, inode: inode))
  }

  private static func load<T: FixedWidthInteger>(_: T.Type, _ bytes: UnsafeRawBufferPointer, _ offset: Int)
    -> T
  {
    bytes.loadUnaligned(fromByteOffset: offset, as: T.self)
  }
}
