import CLinuxEpoll
import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A listening address served by every loop of a group, each accepting its
/// own connections: one listening socket per loop, bound with
/// `SO_REUSEPORT`, so the kernel spreads new connections over the loops and
/// a connection is served where it was accepted — no hand-off from one loop
/// to another per connection (nginx's `reuseport`).
///
/// Before the per-loop sockets are bound, a probe socket without
/// `SO_REUSEPORT` is bound to the address and closed: a port another process
/// holds is reported in use, as a plain bind would, rather than shared with
/// it. (Sharing needs the same user; the probe keeps a second pinproxy from
/// silently taking half of the first one's connections.)
///
/// Each loop's socket is confined to that loop (`ListenerSocket`); the
/// public entry points hop onto every loop.
public final class Listener: @unchecked Sendable {
  public let address: SocketAddress
  private let sockets: [ListenerSocket]

  public init(
    address: SocketAddress, group: EventLoopGroup,
    onExhausted: @escaping @Sendable (String) -> Void = { _ in },
    admits: @escaping @Sendable (SocketAddress) -> Bool = { _ in true },
    acceptsPerBatch: Int = Listener.acceptsPerBatch,
    onAccept: @escaping @Sendable (Int32, SocketAddress, EventLoop) -> Void
  ) throws(SocketError) {
    // Port 0 asks the kernel for one port; the other loops' sockets join it.
    let probe = try Socket.listen(on: address, reusePort: false)
    let bound = Socket.localAddress(probe) ?? address
    _ = Glibc.close(probe)
    self.address = bound
    var sockets: [ListenerSocket] = []
    do throws(SocketError) {
      for loop in group.loops {
        let fd = try Socket.listen(on: bound, reusePort: true)
        let socket = ListenerSocket(
          fd: fd, loop: loop, onExhausted: onExhausted, admits: admits, acceptsPerBatch: acceptsPerBatch,
          onAccept: onAccept)
        sockets.append(socket)
        let failure: SocketError? = loop.runAndWait {
          do throws(SocketError) {
            try socket.open()
            return nil
          } catch {
            return error
          }
        }
        if let failure { throw failure }
      }
    } catch {
      for socket in sockets { socket.loop.runAndWait { socket.close() } }
      throw error
    }
    self.sockets = sockets
  }

  /// Stops accepting and closes every loop's socket (idempotent).
  public func close() {
    for socket in sockets { socket.loop.runAndWait { socket.close() } }
  }

  /// Stops accepting for a while (e.g. at the connection limit) without
  /// closing: new connections wait in the kernel's backlog.
  public func pause() {
    for socket in sockets { socket.loop.execute { socket.pause() } }
  }

  public func resume() {
    for socket in sockets { socket.loop.execute { socket.resume() } }
  }
}

/// One loop's listening socket: in the loop's epoll set exactly while
/// listening and not backing off; its accepts are served on that loop.
/// Confined to `loop`.
final class ListenerSocket: ReadinessHandler, @unchecked Sendable {
  let loop: EventLoop
  private let fd: Int32
  private let onAccept: @Sendable (Int32, SocketAddress, EventLoop) -> Void
  private let onExhausted: @Sendable (String) -> Void
  /// Decides, before anything is read, whether a client address may
  /// connect at all; a refused socket is closed at once.
  private let admits: @Sendable (SocketAddress) -> Bool
  private var state = State.listening
  private var token: ReadinessToken?
  /// Accepts per readiness batch (`Listener.acceptsPerBatch` unless the
  /// listener's owner wants its new connections read sooner).
  let acceptsPerBatch: Int
  /// Accepting stopped because the process or system ran out of file
  /// descriptors (or memory); `accept` would fail again at once.
  private var backingOff = false

  enum State { case listening, paused, closed }

  init(
    fd: Int32, loop: EventLoop, onExhausted: @escaping @Sendable (String) -> Void,
    admits: @escaping @Sendable (SocketAddress) -> Bool, acceptsPerBatch: Int = Listener.acceptsPerBatch,
    onAccept: @escaping @Sendable (Int32, SocketAddress, EventLoop) -> Void
  ) {
    self.fd = fd
    self.acceptsPerBatch = acceptsPerBatch
    self.loop = loop
    self.onExhausted = onExhausted
    self.admits = admits
    self.onAccept = onAccept
  }

  func open() throws(SocketError) {
    do throws(SocketError) {
      try watch(true)
    } catch {
      state = .closed
      _ = Glibc.close(fd)
      throw error
    }
  }

  func close() {
    loop.preconditionInLoop()
    guard state != .closed else { return }
    state = .closed
    backingOff = false
    try? watch(false)
    _ = Glibc.close(fd)
  }

  func pause() {
    loop.preconditionInLoop()
    guard state == .listening else { return }
    state = .paused
    try? watch(false)
  }

  func resume() {
    loop.preconditionInLoop()
    guard state == .paused else { return }
    state = .listening
    if !backingOff { try? watch(true) }
  }

  private func watch(_ on: Bool) throws(SocketError) {
    loop.preconditionInLoop()
    if on, token == nil {
      token = try loop.readiness.register(fd, .read, handler: self)
    } else if !on, let current = token {
      loop.readiness.deregister(fd, current)
      token = nil
    }
  }

  /// Out of descriptors: stop accepting, and try again after a rest.
  private func backOff(_ reason: String) {
    loop.preconditionInLoop()
    guard !backingOff else { return }
    backingOff = true
    try? watch(false)
    onExhausted(reason)
    loop.queue.asyncAfter(deadline: .now() + Listener.exhaustionBackoff) { [self] in
      guard backingOff else { return }
      backingOff = false
      if state == .listening { try? watch(true) }
    }
  }

  func ready(_ events: UInt32) {
    loop.preconditionInLoop()
    for _ in 0..<acceptsPerBatch {
      guard state == .listening && !backingOff else { return }
      var storage = sockaddr_storage()
      var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
      let client = withUnsafeMutablePointer(to: &storage) { pointer in
        pp_accept_nonblocking(fd, pointer, &length)
      }
      guard client >= 0 else {
        let error = errno
        switch error {
        case EINTR, ECONNABORTED: continue
        case EMFILE, ENFILE, ENOBUFS, ENOMEM: backOff(String(cString: strerror(error)))
        default: break
        }
        return
      }
      let address = SocketAddress(storage: storage, length: length)
      guard admits(address) else {
        _ = Glibc.close(client)
        continue
      }
      Socket.setNoDelay(client)
      onAccept(client, address, loop)
    }
  }
}

extension Listener {
  /// How long accepting rests after EMFILE/ENFILE before trying again. The
  /// pending connections wait in the kernel's backlog meanwhile; retrying at
  /// once would spin the accept loop at full CPU.
  public static let exhaustionBackoff = DispatchTimeInterval.milliseconds(100)
  /// Accepts per readiness batch; the socket stays ready (level-triggered)
  /// and the rest come in the next batch, after the sockets already open
  /// had their turn.
  public static let acceptsPerBatch = 64
}

/// Opens an outbound TCP connection without blocking the loop: tries each
/// address in turn, each bounded by `timeout`.
public enum Connector {
  public enum Failure: Error, Sendable {
    case timedOut(String)
    /// The peer answered with a reset (ECONNREFUSED): nothing listens there.
    case refused(String)
    /// Any other failure: no route, no address, no socket.
    case unreachable(String)

    /// The failure of a connect that ended with `code` (an errno).
    static func failed(_ message: String, errno code: Int32) -> Failure {
      code == ECONNREFUSED ? .refused(message) : .unreachable(message)
    }
  }

  public static func connect(
    to addresses: [SocketAddress], on loop: EventLoop, timeout: Double,
    _ completion: @escaping @Sendable (Result<Int32, Failure>) -> Void
  ) {
    loop.preconditionInLoop()
    guard let address = addresses.first else {
      return completion(.failure(.unreachable("no address to connect to")))
    }
    let rest = Array(addresses.dropFirst())
    let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else {
      return completion(.failure(.unreachable("socket: \(String(cString: strerror(errno)))")))
    }
    Socket.makeNonBlocking(fd)
    let result = address.withSockaddr { Glibc.connect(fd, $0, $1) }
    if result == 0 { return completion(.success(fd)) }
    guard errno == EINPROGRESS else {
      let code = errno
      let message = "\(address): \(String(cString: strerror(code)))"
      _ = Glibc.close(fd)
      return rest.isEmpty
        ? completion(.failure(.failed(message, errno: code)))
        : connect(to: rest, on: loop, timeout: timeout, completion)
    }
    PendingConnect(fd: fd, address: address, loop: loop, timeout: timeout) { outcome in
      switch outcome {
      case .success: completion(outcome)
      case .failure where !rest.isEmpty: connect(to: rest, on: loop, timeout: timeout, completion)
      case .failure: completion(outcome)
      }
    }.start()
  }
}

/// One in-progress non-blocking connect: write readiness reports
/// completion, a timer bounds it. Exactly one outcome is delivered. Confined
/// to `loop` (`loop.queue`): readiness, the timer and `start` all run there.
final class PendingConnect: ReadinessHandler, @unchecked Sendable {
  enum State { case waiting, finished }

  let fd: Int32
  let address: SocketAddress
  let loop: EventLoop
  let timeout: Double
  let completion: (Result<Int32, Connector.Failure>) -> Void
  private var state = State.waiting
  private var token: ReadinessToken?
  private var timer: LoopTimer?

  init(
    fd: Int32, address: SocketAddress, loop: EventLoop, timeout: Double,
    completion: @escaping (Result<Int32, Connector.Failure>) -> Void
  ) {
    self.fd = fd
    self.address = address
    self.loop = loop
    self.timeout = timeout
    self.completion = completion
  }

  func start() {
    loop.preconditionInLoop()
    do {
      token = try loop.readiness.register(fd, .write, handler: self)
    } catch {
      return finish(.failure(.unreachable("\(address): \(error)")))
    }
    timer = loop.schedule(after: timeout) { [self] in
      finish(.failure(.timedOut("connect to \(address) took longer than \(timeout) s")))
    }
  }

  func ready(_ events: UInt32) {
    var error: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
    finish(
      error == 0
        ? .success(fd) : .failure(.failed("\(address): \(String(cString: strerror(error)))", errno: error)))
  }

  private func finish(_ outcome: Result<Int32, Connector.Failure>) {
    loop.preconditionInLoop()
    guard state == .waiting else { return }
    state = .finished
    timer?.cancel()
    // Out of the epoll set before the fd is closed (failure) or handed on
    // (success: the new owner registers it afresh).
    if let token { loop.readiness.deregister(fd, token) }
    token = nil
    if case .failure = outcome { _ = Glibc.close(fd) }
    completion(outcome)
  }
}
