import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Thin wrappers over the socket calls, each returning a `SocketError` with errno.
enum Socket {
  static func makeNonBlocking(_ fd: Int32) {
    let flags = fcntl(fd, F_GETFL, 0)
    _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    setNoDelay(fd)
  }

  /// Small writes (a response head) go out at once instead of waiting for an ACK (Nagle).
  static func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
  }

  /// - Parameter reusePort: `SO_REUSEPORT`: other sockets of this user may
  ///   bind the same address, and the kernel spreads connections over them.
  static func listen(on address: SocketAddress, reusePort: Bool, backlog: Int32 = 1024) throws(SocketError)
    -> Int32
  {
    let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw SocketError(operation: "socket", code: errno) }
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    if reusePort {
      _ = setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, socklen_t(MemoryLayout<Int32>.size))
    }
    let bound = address.withSockaddr { bind(fd, $0, $1) }
    guard bound == 0 else {
      let code = errno
      close(fd)
      throw SocketError(operation: "bind \(address)", code: code)
    }
    guard Glibc.listen(fd, backlog) == 0 else {
      let code = errno
      close(fd)
      throw SocketError(operation: "listen \(address)", code: code)
    }
    makeNonBlocking(fd)
    return fd
  }

  static func localAddress(_ fd: Int32) -> SocketAddress? {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let ok = withUnsafeMutablePointer(to: &storage) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
    }
    return ok ? SocketAddress(storage: storage, length: length) : nil
  }
}

public enum SignalHandling {
  /// Writes to a closed peer must fail with EPIPE, not kill the process.
  public static func ignoreSIGPIPE() { signal(SIGPIPE, SIG_IGN) }
}

/// A connected pair of sockets in this process: the seam for in-process
/// tests of anything that owns a `Connection` (a session, the splice),
/// with no listener and no port in between.
public enum SocketPair {
  /// Two connected AF_UNIX stream sockets, both non-blocking. The caller
  /// owns both descriptors (a `Connection` made from one closes it).
  public static func makeNonBlocking() throws(SocketError) -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
      throw SocketError(operation: "socketpair", code: errno)
    }
    for fd in fds {
      let flags = fcntl(fd, F_GETFL, 0)
      _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
    }
    return (fds[0], fds[1])
  }
}
