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

/// A non-blocking TCP socket watched by one Dispatch read source and one
/// write source, both on the connection's loop queue.
///
/// Lifetime rules: a source is resumed before it is cancelled (a suspended
/// source is never released), and the fd is closed exactly once, after both
/// cancel handlers ran. Pending output is bounded only by the caller, which
/// must stop producing when `isAboveHighWatermark` (back-pressure).
public final class Connection: ByteChannel, @unchecked Sendable {
  public enum State: Equatable {
    case open
    /// Both sources cancelled; waiting for their cancel handlers.
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

  enum SourceState { case running, suspended, cancelled }

  public let loop: EventLoop
  public let fd: Int32
  public let peer: String
  /// Held strongly until `channelDidClose` has been delivered: the
  /// session that owns this connection lives exactly as long as it is open.
  public var delegate: (any ChannelDelegate)?
  public private(set) var state: State = .open
  public var highWatermark = 256 * 1024
  public var lowWatermark = 64 * 1024

  private let readSource: DispatchSourceRead
  private let writeSource: DispatchSourceWrite
  private var readState = SourceState.suspended
  private var writeState = SourceState.suspended
  private var outputState = OutputState.open
  private var output: [UInt8] = []
  private var outputOffset = 0
  private var passedHighWatermark = false
  private var pendingCancels = 2
  private var closeError: SocketError?

  /// Wraps a connected, non-blocking fd. Nothing is read until the owner
  /// calls `resumeReading()`, so it can set the delegate first.
  public init(fd: Int32, peer: String, loop: EventLoop) {
    self.fd = fd
    self.peer = peer
    self.loop = loop
    readSource = DispatchSource.makeReadSource(fileDescriptor: fd, queue: loop.queue)
    writeSource = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: loop.queue)
    readSource.setEventHandler { [self] in handleReadable() }
    writeSource.setEventHandler { [self] in handleWritable() }
    readSource.setCancelHandler { [self] in sourceCancelled() }
    writeSource.setCancelHandler { [self] in sourceCancelled() }
  }

  public var pendingOutputBytes: Int { output.count - outputOffset }
  public var isOpen: Bool { state == .open }
  /// A socket keeps nothing it has read: the delegate has had every byte.
  public var hasBufferedInput: Bool { false }
  public var isAboveHighWatermark: Bool { pendingOutputBytes > highWatermark }

  // MARK: Entry points (on the loop)

  public func write(_ bytes: [UInt8]) {
    loop.preconditionInLoop()
    guard state == .open, outputState == .open, !bytes.isEmpty else { return }
    if pendingOutputBytes == 0 {
      let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if written == bytes.count { return }
      if written < 0 && errno != EAGAIN && errno != EWOULDBLOCK {
        return fail(SocketError(operation: "write", code: errno))
      }
      output = Array(bytes[max(0, written)...])
      outputOffset = 0
    } else {
      output += bytes
    }
    if pendingOutputBytes > highWatermark { passedHighWatermark = true }
    setWriting(true)
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
    if state == .open && readState == .running {
      readSource.suspend()
      readState = .suspended
    }
  }

  public func resumeReading() {
    loop.preconditionInLoop()
    if state == .open && readState == .suspended {
      readState = .running
      readSource.resume()
      // Bytes that arrived while paused may have had their edge already.
      loop.execute { [self] in handleReadable() }
    }
  }

  /// Closes now; queued output that was not written is dropped.
  public func close() {
    loop.preconditionInLoop()
    guard state == .open else { return }
    state = .closing
    for (source, stateKeyPath) in [
      (readSource as DispatchSourceProtocol, \Connection.readState), (writeSource, \Connection.writeState),
    ] {
      if self[keyPath: stateKeyPath] == .suspended { source.resume() }
      self[keyPath: stateKeyPath] = .cancelled
      source.cancel()
    }
    output = []
    outputOffset = 0
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

  // MARK: Source handlers

  /// Reads until the socket would block: libdispatch delivers readiness
  /// edge-triggered on Linux, so bytes (or a FIN) left unread would get no
  /// further event. At most 1 MiB per turn, then the rest is continued as a
  /// new loop task so other connections are served in between.
  private func handleReadable() {
    var budget = 16
    while state == .open && readState == .running {
      guard budget > 0 else {
        loop.execute { [self] in handleReadable() }
        return
      }
      budget -= 1
      // Read straight into uninitialised storage: zero-filling 64 KiB per read
      // showed up as a leading cost per request.
      var count = 0
      let bytes = [UInt8](unsafeUninitializedCapacity: 64 * 1024) { buffer, initialized in
        count = Glibc.read(fd, buffer.baseAddress, buffer.count)
        initialized = max(0, count)
      }
      if count > 0 {
        delegate?.channel(self, didRead: bytes)
      } else if count == 0 {
        pauseReading()
        delegate?.channelDidReadEOF(self)
        return
      } else if errno == EINTR {
        continue
      } else if errno == EAGAIN || errno == EWOULDBLOCK {
        return
      } else {
        return fail(SocketError(operation: "read", code: errno))
      }
    }
  }

  /// Writes until the queue is empty or the socket would block (edge-triggered, as above).
  private func handleWritable() {
    guard state == .open else { return }
    while pendingOutputBytes > 0 {
      let remaining = pendingOutputBytes
      let written = output.withUnsafeBytes { raw in
        Glibc.write(fd, raw.baseAddress! + outputOffset, remaining)
      }
      if written < 0 {
        if errno == EINTR { continue }
        if errno != EAGAIN && errno != EWOULDBLOCK {
          return fail(SocketError(operation: "write", code: errno))
        }
        break
      }
      outputOffset += written
    }
    if outputOffset == output.count {
      output = []
      outputOffset = 0
    } else if outputOffset > 1 << 20 {
      output.removeFirst(outputOffset)
      outputOffset = 0
    }
    if pendingOutputBytes == 0 {
      setWriting(false)
      if outputState == .shutdownAfterFlush { finishShutdown() }
      if outputState == .closeAfterFlush { return close() }
    }
    if passedHighWatermark && pendingOutputBytes <= lowWatermark {
      passedHighWatermark = false
      delegate?.channelDidDrain(self)
    }
  }

  private func setWriting(_ on: Bool) {
    if on && writeState == .suspended {
      writeState = .running
      writeSource.resume()
    } else if !on && writeState == .running {
      writeSource.suspend()
      writeState = .suspended
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

  private func sourceCancelled() {
    pendingCancels -= 1
    guard pendingCancels == 0 else { return }
    _ = Glibc.close(fd)
    state = .closed
    let owner = delegate
    delegate = nil
    owner?.channelDidClose(self, error: closeError)
  }
}
