import Dispatch
import Foundation
import PinTrust
import Synchronization

/// Standard error, shared by every log line, in one order.
///
/// Event lines (`refused`, `reload-ok`, …) are rare and written at once by
/// their caller, after whatever is queued, so they are on the terminal or in
/// the journal before the caller goes on (an `exit` right after one loses
/// nothing). Access lines are one per request: a loop only appends them to a
/// bounded buffer, and one background thread writes the buffer in batches —
/// one `write` per batch instead of one per request, and no syscall on the
/// loop. Past `capacity` pending bytes a line is dropped and counted instead
/// of growing the buffer: a log reader that stalls (a full pipe) must not
/// stall or bloat the proxy.
public final class LogSink: Sendable {
  public static let standardError = LogSink(fd: 2)

  /// How long the writer waits after the first queued line so that one
  /// `write` takes the lines of many requests.
  static let batchDelay = 0.020

  private struct Pending {
    var bytes: [UInt8] = []
    var dropped = 0
    var writerStarted = false
  }

  private let fd: Int32
  private let capacity: Int
  private let pending = Locked(Pending())
  /// Held while bytes go to the fd, so batches and event lines never interleave.
  private let output = Locked(())
  private let wake = DispatchSemaphore(value: 0)

  public init(fd: Int32, capacity: Int = 1 << 20) {
    self.fd = fd
    self.capacity = capacity
  }

  /// Lines dropped because the buffer was full.
  public var droppedLines: Int { pending.withLock { $0.dropped } }

  /// Queues one line for the background writer; `false` when it was dropped.
  @discardableResult
  public func enqueue(_ line: [UInt8]) -> Bool {
    let (accepted, signal, start) = pending.withLock { state -> (Bool, Bool, Bool) in
      guard state.bytes.count + line.count <= capacity else {
        state.dropped += 1
        return (false, false, false)
      }
      let wasEmpty = state.bytes.isEmpty
      if wasEmpty && state.bytes.capacity < 4096 { state.bytes.reserveCapacity(16 * 1024) }
      state.bytes.append(contentsOf: line)
      let start = !state.writerStarted
      state.writerStarted = true
      return (true, wasEmpty, start)
    }
    if start { startWriter() }
    // One wake-up per batch: only the line that found the buffer empty signals.
    if signal { wake.signal() }
    return accepted
  }

  /// Writes what is queued, then `line`, before returning.
  public func writeNow(_ line: [UInt8]) {
    output.withLock { _ in
      writeAll(takePending())
      writeAll(line)
    }
  }

  /// Writes everything queued so far (at shutdown, and for tests).
  public func flush() {
    output.withLock { _ in writeAll(takePending()) }
  }

  private func takePending() -> [UInt8] {
    pending.withLock { state in
      var taken: [UInt8] = []
      swap(&taken, &state.bytes)
      return taken
    }
  }

  private func startWriter() {
    let thread = Thread { [self] in
      while true {
        wake.wait()
        Thread.sleep(forTimeInterval: Self.batchDelay)
        flush()
      }
    }
    thread.name = "pinproxy.log"
    thread.start()
  }

  /// `write` until done; EINTR retried, any other error drops the rest (a
  /// closed standard error must not take the proxy down).
  private func writeAll(_ bytes: [UInt8]) {
    guard !bytes.isEmpty else { return }
    bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        let written = Glibc.write(fd, raw.baseAddress! + offset, raw.count - offset)
        if written > 0 {
          offset += written
        } else if written < 0 && errno == EINTR {
          continue
        } else {
          return
        }
      }
    }
  }
}
