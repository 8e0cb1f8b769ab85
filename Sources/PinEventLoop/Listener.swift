import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A listening socket whose accepts are spread over the loops of a group.
/// Accepting runs on the listener's own queue; each accepted fd is handed to
/// the next loop, where `onAccept` builds its connection.
///
/// Its state is confined to `queue`: the public entry points (`close`,
/// `pause`, `resume`) hop onto it, and the accept handler runs on it.
public final class Listener: @unchecked Sendable {
  public let address: SocketAddress
  private let fd: Int32
  private let queue: DispatchQueue
  private let source: DispatchSourceRead
  private let group: EventLoopGroup
  private let onAccept: @Sendable (Int32, String, EventLoop) -> Void
  private let onExhausted: @Sendable (String) -> Void
  private var state = State.listening
  /// Accepting stopped because the process or system ran out of file
  /// descriptors (or memory); `accept` would fail again at once.
  private var backingOff = false

  enum State { case listening, paused, closed }

  /// How long accepting rests after EMFILE/ENFILE before trying again. The
  /// pending connections wait in the kernel's backlog meanwhile; retrying at
  /// once would spin the accept queue at full CPU.
  public static let exhaustionBackoff = DispatchTimeInterval.milliseconds(100)

  public init(
    address: SocketAddress, group: EventLoopGroup,
    onExhausted: @escaping @Sendable (String) -> Void = { _ in },
    onAccept: @escaping @Sendable (Int32, String, EventLoop) -> Void
  ) throws(SocketError) {
    fd = try Socket.listen(on: address)
    self.address = Socket.localAddress(fd) ?? address
    self.group = group
    self.onAccept = onAccept
    self.onExhausted = onExhausted
    queue = DispatchQueue(label: "pinproxy.accept.\(address)")
    source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
    source.setEventHandler { [self] in acceptAll() }
    let fd = self.fd
    source.setCancelHandler { _ = Glibc.close(fd) }
    source.resume()
  }

  /// Stops accepting and closes the socket (idempotent).
  public func close() {
    queue.sync {
      guard state != .closed else { return }
      if isSuspended { source.resume() }
      state = .closed
      backingOff = false
      source.cancel()
    }
  }

  /// The source is suspended while paused or backing off (never both counted twice).
  private var isSuspended: Bool { state == .paused || backingOff }

  /// Stops accepting for a while (e.g. at the connection limit) without closing.
  public func pause() {
    queue.async { [self] in
      guard state == .listening else { return }
      if !backingOff { source.suspend() }
      state = .paused
    }
  }

  public func resume() {
    queue.async { [self] in
      guard state == .paused else { return }
      state = .listening
      if !backingOff { source.resume() }
    }
  }

  /// Out of descriptors: stop accepting, and try again after a rest.
  private func backOff(_ reason: String) {
    dispatchPrecondition(condition: .onQueue(queue))
    guard !backingOff else { return }
    backingOff = true
    if state == .listening { source.suspend() }
    onExhausted(reason)
    queue.asyncAfter(deadline: .now() + Listener.exhaustionBackoff) { [self] in
      guard backingOff else { return }
      backingOff = false
      if state == .listening {
        source.resume()
        acceptAll()
      }
    }
  }

  private func acceptAll() {
    dispatchPrecondition(condition: .onQueue(queue))
    while state == .listening && !backingOff {
      var storage = sockaddr_storage()
      var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
      let client = withUnsafeMutablePointer(to: &storage) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &length) }
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
      Socket.makeNonBlocking(client)
      let peer = SocketAddress(storage: storage, length: length).description
      let loop = group.next()
      loop.execute { [onAccept] in onAccept(client, peer, loop) }
    }
  }
}

/// Opens an outbound TCP connection without blocking the loop: tries each
/// address in turn, each bounded by `timeout`.
public enum Connector {
  public enum Failure: Error, Sendable {
    case timedOut(String)
    case refused(String)
  }

  public static func connect(
    to addresses: [SocketAddress], on loop: EventLoop, timeout: Double,
    _ completion: @escaping @Sendable (Result<Int32, Failure>) -> Void
  ) {
    loop.preconditionInLoop()
    guard let address = addresses.first else {
      return completion(.failure(.refused("no address to connect to")))
    }
    let rest = Array(addresses.dropFirst())
    let fd = socket(address.family, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else {
      return completion(.failure(.refused("socket: \(String(cString: strerror(errno)))")))
    }
    Socket.makeNonBlocking(fd)
    let result = address.withSockaddr { Glibc.connect(fd, $0, $1) }
    if result == 0 { return completion(.success(fd)) }
    guard errno == EINPROGRESS else {
      let message = "\(address): \(String(cString: strerror(errno)))"
      _ = Glibc.close(fd)
      return rest.isEmpty
        ? completion(.failure(.refused(message))) : connect(to: rest, on: loop, timeout: timeout, completion)
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

/// One in-progress non-blocking connect: a write source reports completion,
/// a timer bounds it. Exactly one outcome is delivered. Confined to `loop`
/// (`loop.queue`): the source, the timer and `start` all run there.
final class PendingConnect: @unchecked Sendable {
  enum State { case waiting, finished }

  let fd: Int32
  let address: SocketAddress
  let loop: EventLoop
  let timeout: Double
  let completion: (Result<Int32, Connector.Failure>) -> Void
  private var state = State.waiting
  private var source: DispatchSourceWrite?
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
    let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: loop.queue)
    self.source = source
    source.setEventHandler { [self] in
      var error: Int32 = 0
      var length = socklen_t(MemoryLayout<Int32>.size)
      _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
      finish(
        error == 0 ? .success(fd) : .failure(.refused("\(address): \(String(cString: strerror(error)))")))
    }
    source.resume()
    timer = loop.schedule(after: timeout) { [self] in
      finish(.failure(.timedOut("connect to \(address) took longer than \(timeout) s")))
    }
  }

  private func finish(_ outcome: Result<Int32, Connector.Failure>) {
    loop.preconditionInLoop()
    guard state == .waiting else { return }
    state = .finished
    timer?.cancel()
    // The fd outlives this watcher on success, so the cancel handler must not close it.
    source?.cancel()
    source = nil
    if case .failure = outcome { _ = Glibc.close(fd) }
    completion(outcome)
  }
}
