import CLinuxEpoll
import Glibc

/// One loop's `NETLINK_SOCK_DIAG` socket: asks the kernel who owns the
/// socket at the other end of a connection accepted from this host. The
/// kernel answers a one-socket request inside `sendto`, so the answer is
/// read at once without waiting (a missing answer is "unknown"); one
/// request and one read per lookup, no allocation (both buffers are the
/// socket's own).
///
/// Confined to its loop: `owner(ofPeerOf:)` runs on the accepting loop.
public final class SockDiagSocket: @unchecked Sendable {
  private let fd: Int32
  private var sequence: UInt32 = 0
  private let request = UnsafeMutableRawBufferPointer.allocate(
    byteCount: SockDiagMessage.requestBytes, alignment: 8)
  /// An answer is one `inet_diag_msg` (88 bytes with its header); an
  /// error answer carries the request back. Room for a few stale ones.
  private let answer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 8)

  /// nil when the kernel offers no sock_diag (then every peer is unknown).
  public init?() {
    fd = pp_sock_diag_open()
    guard fd >= 0 else {
      request.deallocate()
      answer.deallocate()
      return nil
    }
  }

  deinit {
    _ = Glibc.close(fd)
    request.deallocate()
    answer.deallocate()
  }

  /// What the kernel says of the socket whose source is `tuple.source`
  /// and whose destination is `tuple.destination`: its owner, that it is
  /// there without one (`unknown`, also when no answer could be read), or
  /// that this host has no such socket (`absent`).
  public func lookUp(_ tuple: SocketTuple) -> SockDiagMessage.Answer {
    sequence &+= 1
    SockDiagMessage.encodeRequest(tuple, sequence: sequence, into: request)
    guard pp_sock_diag_send(fd, request.baseAddress, UInt(request.count)) == request.count else {
      return .unknown
    }
    // Stale answers of earlier requests (none, normally) are skipped; the
    // bound keeps a confused socket from spinning the loop.
    for _ in 0..<4 {
      let count = pp_sock_diag_receive(fd, answer.baseAddress, UInt(answer.count))
      guard count > 0 else { return .unknown }
      let answer = SockDiagMessage.decodeAnswer(
        UnsafeRawBufferPointer(rebasing: self.answer[0..<count]), sequence: sequence, tuple: tuple)
      if answer != .unrelated { return answer }
    }
    return .unknown
  }

  /// The owner of that socket; nil when the kernel does not tell one.
  public func owner(of tuple: SocketTuple) -> SocketOwner? {
    if case .owner(let owner) = lookUp(tuple) { return owner }
    return nil
  }
}

extension SocketAddress {
  /// The local address of a connected socket (`getsockname`).
  public static func local(of fd: Int32) -> SocketAddress? {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let result = withUnsafeMutablePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return result == 0 ? SocketAddress(storage: storage, length: length) : nil
  }
}
