import CLinuxEpoll
import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

public struct SocketError: Error, Sendable, CustomStringConvertible {
  public let operation: String
  public let code: Int32
  public var description: String { "\(operation): \(String(cString: strerror(code)))" }
}

/// A non-blocking TCP socket registered with its loop's `Readiness`.
///
/// Lifetime rules: the fd is registered with the loop's epoll instance the
/// first time it wants to read or write, and leaves it (EPOLL_CTL_DEL)
/// before it is closed, exactly once; `channelDidClose` is delivered as a
/// later loop task, so no delegate call re-enters the caller of `close()`.
/// Pending output is bounded only by the caller, which must stop producing
/// when `isAboveHighWatermark` (back-pressure).
public final class Connection: ByteChannel, ReadinessHandler, PostedWork, @unchecked Sendable {
  public enum State: Equatable {
    case open
    /// Out of the epoll set and closed; `channelDidClose` is on its way.
    case closing
    case closed
  }

  enum OutputState: Equatable {
    case open
    /// Send FIN once the pending output is written.
    case shutdownAfterFlush
    /// Close once the pending output is written.
    case closeAfterFlush
    case shutDown
  }

  public let loop: EventLoop
  public private(set) var fd: Int32
  /// The peer as accepted (a client), or nil for a connection named by
  /// text (an upstream dialled by name).
  public private(set) var peerAddress: SocketAddress?
  private var peerLabel: String?
  /// The peer as log lines show it: formatted when a line asks, not per
  /// accepted connection.
  public var peer: String { peerLabel ?? peerAddress?.description ?? "?" }
  /// Held strongly until `channelDidClose` has been delivered: the
  /// session that owns this connection lives exactly as long as it is open.
  public var delegate: (any ChannelDelegate)?
  public private(set) var state: State = .open
  /// Called once, synchronously, when the descriptor is closed, before
  /// `channelDidClose` is delivered: for counts that must follow the real
  /// sockets (admission), not the later clean-up.
  public var onClose: (() -> Void)?
  public var highWatermark = 256 * 1024
  public var lowWatermark = 64 * 1024

  /// What the owner wants to hear about, and what epoll was last told.
  private var wanted: Interest = []
  private var registered: Interest = []
  private var token: ReadinessToken?
  private var outputState = OutputState.open
  private var output = OutputQueue()
  private var passedHighWatermark = false
  /// Writes are queued, not sent, until `uncork` (see `cork`).
  private var corked = false
  private var closeError: SocketError?

  /// Wraps a connected, non-blocking fd. Nothing is read until the owner
  /// calls `resumeReading()`, so it can set the delegate first.
  public init(fd: Int32, peer: String, loop: EventLoop) {
    self.fd = fd
    (peerAddress, peerLabel) = (nil, peer)
    self.loop = loop
  }

  /// An accepted connection, known by its peer's socket address.
  public init(fd: Int32, address: SocketAddress, loop: EventLoop) {
    self.fd = fd
    (peerAddress, peerLabel) = (address, nil)
    self.loop = loop
  }

  /// Never registered (a registered connection is held by its loop until
  /// closed), so the fd only needs closing.
  deinit { if state == .open { _ = Glibc.close(fd) } }

  /// Serves a new socket, as `init(fd:address:loop:)` would: a closed
  /// connection kept by the owner that is used again whole (a loop's
  /// retired forward session, `ForwardSession.serve`), so the next client
  /// costs no new object. Only once the close was told to the delegate: by
  /// then epoll and the loop's posted work let go of it, and nothing of the
  /// old socket (its output, its watermark state, its error) is left.
  public func reopen(fd: Int32, address: SocketAddress) {
    loop.preconditionInLoop()
    precondition(state == .closed && delegate == nil && token == nil, "reopen: a closed connection only")
    self.fd = fd
    (peerAddress, peerLabel) = (address, nil)
    state = .open
    onClose = nil
    (highWatermark, lowWatermark) = (256 * 1024, 64 * 1024)
    (wanted, registered) = ([], [])
    outputState = .open
    output.removeAll()
    (passedHighWatermark, corked, closeError) = (false, false, nil)
  }

  public var pendingOutputBytes: Int { output.count }
  public var isOpen: Bool { state == .open }
  /// A socket keeps nothing it has read: the delegate has had every byte.
  public var hasBufferedInput: Bool { false }
  public var isAboveHighWatermark: Bool { pendingOutputBytes > highWatermark }

  // MARK: Entry points (on the loop)

  /// Writes at once what the socket takes; the rest is queued as this
  /// array, not copied (see `OutputQueue`).
  public func write(_ bytes: [UInt8]) {
    loop.preconditionInLoop()
    guard state == .open, outputState == .open, !bytes.isEmpty else { return }
    let written = bytes.withUnsafeBytes { writeAtOnce($0) }
    guard let written else { return }
    output.append(bytes, from: written)
    queued()
  }

  /// Writes at once what the socket takes; copies only the rest.
  public func write(_ bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    guard state == .open, outputState == .open, !bytes.isEmpty else { return }
    guard let written = writeAtOnce(bytes) else { return }
    output.append(UnsafeRawBufferPointer(rebasing: bytes[written...]))
    queued()
  }

  /// Sends what the socket takes now when nothing waits before it (and not
  /// corked); returns how much was sent, or nil when nothing is left to queue.
  private func writeAtOnce(_ bytes: UnsafeRawBufferPointer) -> Int? {
    guard pendingOutputBytes == 0 && !corked else { return 0 }
    let written = Glibc.write(fd, bytes.baseAddress, bytes.count)
    if written == bytes.count { return nil }
    if written < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
      fail(SocketError(operation: "write", code: errno))
      return nil
    }
    return max(0, written)
  }

  /// Bytes were queued: watermark, and writability unless corked.
  private func queued() {
    if pendingOutputBytes > highWatermark { passedHighWatermark = true }
    if !corked { want(.write, true) }
  }

  /// Holds writes back until `uncork`: what one event produces — a
  /// response head, its body, the end of a chunked stream — then leaves in
  /// one `write` instead of one each (the syscall, and the peer's wake-up,
  /// cost more than the copy into the queue). Back-pressure still sees the
  /// queued bytes.
  public func cork() {
    loop.preconditionInLoop()
    corked = true
  }

  /// Sends what was held back; a socket that takes only part of it is
  /// watched for writability as usual.
  public func uncork() {
    loop.preconditionInLoop()
    guard corked else { return }
    corked = false
    if state == .open && pendingOutputBytes > 0 && !registered.contains(.write) { handleWritable() }
  }

  /// Sends FIN after everything queued so far has been written.
  public func shutdownOutput() {
    loop.preconditionInLoop()
    guard state == .open, outputState == .open else { return }
    outputState = .shutdownAfterFlush
    if pendingOutputBytes == 0 { finishShutdown() }
  }

  public func pauseReading() {
    loop.preconditionInLoop()
    want(.read, false)
  }

  /// Level-triggered readiness reports bytes that arrived while paused in
  /// the next batch; nothing has to be read here.
  public func resumeReading() {
    loop.preconditionInLoop()
    want(.read, true)
  }

  /// Closes now; queued output that was not written is dropped.
  public func close() {
    loop.preconditionInLoop()
    guard state == .open else { return }
    state = .closing
    wanted = []
    if let token {
      loop.readiness.forgetBeforeClose(token)
      self.token = nil
    }
    _ = Glibc.close(fd)
    output.removeAll()
    let hook = onClose
    onClose = nil
    hook?()
    // The delegate is told after the call that closed returns: at the end
    // of the batch when closed inside one, else as a new queue item.
    if loop.readiness.inBatch { return loop.readiness.post(self) }
    loop.execute { [self] in runPosted() }
  }

  /// Tells the delegate the connection closed.
  func runPosted() {
    state = .closed
    let owner = delegate
    delegate = nil
    owner?.channelDidClose(self, error: closeError)
  }

  /// Closes once the queued output has been written (or failed).
  public func closeAfterFlush() {
    loop.preconditionInLoop()
    guard state == .open else { return }
    if pendingOutputBytes == 0 {
      close()
    } else {
      outputState = .closeAfterFlush
    }
  }

  /// Whether the peer has sent bytes (or a FIN) not read yet, asked of the
  /// kernel without consuming them. Used before reusing an idle connection.
  public func hasUnreadInput() -> Bool {
    loop.preconditionInLoop()
    guard state == .open else { return false }
    var byte: UInt8 = 0
    let count = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
    return count >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
  }

  // MARK: Readiness

  /// Tells epoll what is wanted now. An empty interest leaves the epoll set
  /// altogether: epoll reports EPOLLHUP and EPOLLERR whatever the mask, and
  /// a paused reader of a hung-up socket would be woken in every batch.
  private func want(_ interest: Interest, _ on: Bool) {
    guard state == .open else { return }
    if on { wanted.insert(interest) } else { wanted.remove(interest) }
    applyInterest()
  }

  /// Makes epoll's registration match `wanted`.
  private func applyInterest() {
    guard state == .open && wanted != registered else { return }
    do {
      switch (token, wanted.isEmpty) {
      case (nil, true): break
      case (nil, false): token = try loop.readiness.register(fd, wanted, handler: self)
      case (let current?, true):
        loop.readiness.deregister(fd, current)
        token = nil
      case (let current?, false): try loop.readiness.modify(fd, current, wanted)
      }
      registered = wanted
    } catch {
      fail(error)
    }
  }

  func ready(_ events: UInt32) {
    let failed = events & (PP_EPOLLERR | PP_EPOLLHUP) != 0
    if wanted.contains(.write) && (events & PP_EPOLLOUT != 0 || failed) { handleWritable() }
    if wanted.contains(.read) && (events & PP_EPOLLIN != 0 || failed) { handleReadable() }
  }

  /// Reads what is there, at most four buffers per batch; a read that did
  /// not fill the buffer most likely took everything, and if not, the
  /// level-triggered registration reports the rest in the next batch —
  /// either way no read is spent just to see EAGAIN.
  private func handleReadable() {
    let buffer = loop.readBuffer
    for _ in 0..<4 {
      guard state == .open && wanted.contains(.read) else { return }
      let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
      if count > 0 {
        delegate?.channel(self, didReadBuffer: UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        if count < buffer.count { return }
      } else if count == 0 {
        // Reading stops, but epoll hears of it only if the socket outlives
        // the delegate's answer: one closed at once leaves the epoll set by
        // its close, and an `EPOLL_CTL_DEL` first would be one more system
        // call per connection for nothing.
        wanted.remove(.read)
        delegate?.channelDidReadEOF(self)
        return applyInterest()
      } else if errno == EINTR {
        continue
      } else if errno == EAGAIN || errno == EWOULDBLOCK {
        return
      } else {
        return fail(SocketError(operation: "read", code: errno))
      }
    }
  }

  /// Writes what is queued until done or the socket would block.
  private func handleWritable() {
    guard state == .open else { return }
    while pendingOutputBytes > 0 {
      let written = output.write(to: fd)
      if written < 0 {
        if errno == EINTR { continue }
        if errno != EAGAIN && errno != EWOULDBLOCK {
          return fail(SocketError(operation: "write", code: errno))
        }
        break
      }
      // Nothing taken (not expected of a socket): wait for writability, do not spin.
      if written == 0 { break }
    }
    if pendingOutputBytes == 0 {
      want(.write, false)
      if outputState == .shutdownAfterFlush { finishShutdown() }
      if outputState == .closeAfterFlush { return close() }
    } else {
      want(.write, true)
    }
    if passedHighWatermark && pendingOutputBytes <= lowWatermark {
      passedHighWatermark = false
      delegate?.channelDidDrain(self)
    }
  }

  private func finishShutdown() {
    outputState = .shutDown
    _ = Glibc.shutdown(fd, Int32(SHUT_WR))
  }

  private func fail(_ error: SocketError) {
    closeError = error
    close()
  }
}
