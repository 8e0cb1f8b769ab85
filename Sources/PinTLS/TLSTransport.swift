import COpenSSL
import Glibc

/// The ciphertext side of a `TLSEngine`: one custom BIO (an OpenSSL
/// `BIO_METHOD`) where a pair of memory BIOs used to be. OpenSSL reads
/// records straight from the bytes the socket just read — the loop's read
/// buffer, lent for the length of one call (`lend`/`endLoan`) — and writes
/// records into one buffer that the channel hands to the socket whole
/// (`takeOutput`). The memory BIOs copied every byte once more each way
/// and charged their buffer bookkeeping to every record header read.
///
/// Bytes a call did not consume (a record that arrived while the handshake's
/// check waits, say) are copied out of the loan when it ends, and read
/// first next time: at most what the socket read before its reader paused,
/// the same bound the memory BIO had. Output lives only between an engine
/// call and the flush that follows it; past `keptCapacity` its memory
/// is not kept, so an idle connection holds at most that much.
///
/// Used only on its engine's loop, like the engine. The BIO points at this
/// object's `state` without owning it: the engine owns both and frees the
/// `SSL` (and with it the BIO) first.
final class TLSTransport {
  /// Capacity kept between calls, output or kept input: a small request or
  /// response (a few hundred bytes of records) reuses it; a handshake
  /// flight or a bulk write allocates for the call and lets go.
  static let keptCapacity = 4096

  /// What the BIO reads and writes, behind a pointer the BIO holds: plain
  /// memory, so a callback pays no reference counting or exclusivity check.
  struct State {
    /// The bytes lent for the current call, and how many OpenSSL has read.
    var lent = UnsafeRawBufferPointer(start: nil, count: 0)
    var lentRead = 0
    /// Bytes kept from earlier calls, read before any lent ones.
    var carried = ByteStore()
    /// Records OpenSSL wrote that no one has taken yet.
    var output = ByteStore()

    var unreadInput: Int { carried.unread + lent.count - lentRead }

    mutating func read(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
      var copied = carried.take(into: destination, count: count)
      let fromLoan = min(count - copied, lent.count - lentRead)
      if fromLoan > 0 {
        (destination + copied).copyMemory(from: lent.baseAddress! + lentRead, byteCount: fromLoan)
        lentRead += fromLoan
        copied += fromLoan
      }
      return copied
    }

    mutating func endLoan() {
      if lentRead < lent.count { carried.append(UnsafeRawBufferPointer(rebasing: lent[lentRead...])) }
      lent = UnsafeRawBufferPointer(start: nil, count: 0)
      lentRead = 0
    }
  }

  let state = UnsafeMutablePointer<State>.allocate(capacity: 1)

  init() { state.initialize(to: State()) }

  deinit {
    state.pointee.carried.free()
    state.pointee.output.free()
    state.deinitialize(count: 1)
    state.deallocate()
  }

  /// Received ciphertext OpenSSL has not read yet.
  var unreadInput: Int { state.pointee.unreadInput }
  var hasOutput: Bool { state.pointee.output.unread > 0 }

  /// Lends `bytes` (valid until `endLoan`) as the next input, after any
  /// kept bytes. A loan still open (a nested read) is ended first, so its
  /// unread bytes keep their place ahead of these.
  func lend(_ bytes: UnsafeRawBufferPointer) {
    state.pointee.endLoan()
    state.pointee.lent = bytes
  }

  /// Ends the loan: what OpenSSL did not read of it is copied and kept.
  func endLoan() { state.pointee.endLoan() }

  /// Copies `bytes` in as input, after everything received before.
  func keep(_ bytes: UnsafeRawBufferPointer) { state.pointee.carried.append(bytes) }

  /// Room for `count` more bytes of output, reserved before a large write
  /// so its records land in one allocation instead of a growing one.
  func reserveOutput(_ count: Int) { state.pointee.output.reserve(count) }

  /// Hands the pending output to `send` once, then forgets it. The storage
  /// is detached first: `send` may close the socket, and whatever runs then
  /// may write through this engine again (into fresh storage).
  func takeOutput(_ send: (UnsafeRawBufferPointer) -> Void) {
    guard state.pointee.output.unread > 0 else { return }
    var taken = state.pointee.output
    state.pointee.output = ByteStore()
    send(taken.unreadBytes)
    if state.pointee.output.capacity == 0 && taken.capacity <= Self.keptCapacity {
      taken.removeAll()
      state.pointee.output = taken
    } else {
      taken.free()
    }
  }

  /// A BIO of this kind for a new engine's `SSL` (which takes it over).
  func makeBIO() -> OpaquePointer? {
    guard let bio = BIO_new(transportMethod) else { return nil }
    BIO_set_data(bio, UnsafeMutableRawPointer(state))
    BIO_set_init(bio, 1)
    return bio
  }
}

/// A growable run of bytes in malloc'd memory, read from the front: the
/// transport's kept input and its output. Freed explicitly (`free`).
struct ByteStore {
  private(set) var base: UnsafeMutableRawPointer?
  private(set) var capacity = 0
  private var start = 0
  private var end = 0

  var unread: Int { end - start }
  var unreadBytes: UnsafeRawBufferPointer {
    UnsafeRawBufferPointer(start: base.map { $0 + start }, count: end - start)
  }

  /// Makes room for `count` more bytes at the end (moving unread bytes to the front first).
  mutating func reserve(_ count: Int) {
    if start > 0 && start == end { (start, end) = (0, 0) }
    let (needed, overflow) = end.addingReportingOverflow(count)
    precondition(!overflow, "byte store size overflows")
    guard needed > capacity else { return }
    if start > 0, let base {
      base.copyMemory(from: base + start, byteCount: end - start)
      (start, end) = (0, end - start)
      if end + count <= capacity { return }
    }
    let grown = max(end + count, capacity * 2, 512)
    guard let moved = realloc(base, grown) else { fatalError("out of memory for TLS records") }
    base = moved
    capacity = grown
  }

  mutating func append(_ bytes: UnsafeRawBufferPointer) {
    guard !bytes.isEmpty else { return }
    reserve(bytes.count)
    (base! + end).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
    end += bytes.count
  }

  /// Moves up to `count` unread bytes into `destination`; returns how many.
  mutating func take(into destination: UnsafeMutableRawPointer, count: Int) -> Int {
    let taken = min(count, end - start)
    guard taken > 0 else { return 0 }
    destination.copyMemory(from: base! + start, byteCount: taken)
    start += taken
    // Kept input is rare and short-lived: its memory goes once it is read.
    if start == end && capacity > TLSTransport.keptCapacity { free() }
    return taken
  }

  mutating func removeAll() { (start, end) = (0, 0) }

  mutating func free() {
    Glibc.free(base)
    self = ByteStore()
  }
}

/// The state a BIO was made for: the engine keeps it for as long as its
/// `SSL` (and so the BIO) exists.
private func state(_ bio: OpaquePointer?) -> UnsafeMutablePointer<TLSTransport.State> {
  BIO_get_data(bio)!.assumingMemoryBound(to: TLSTransport.State.self)
}

/// Made once: OpenSSL keeps method tables for the life of the process.
private nonisolated(unsafe) let transportMethod: OpaquePointer = {
  guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "pinproxy transport") else {
    fatalError("OpenSSL could not make a BIO method (out of memory)")
  }
  _ = BIO_meth_set_read(method) { bio, destination, count in
    pp_BIO_clear_retry_flags(bio)
    guard let destination, count > 0 else { return 0 }
    let copied = state(bio).pointee.read(into: destination, count: Int(count))
    // Nothing yet is "try again", never end of file: the peer's EOF reaches
    // the channel from the socket, not through OpenSSL.
    if copied == 0 {
      pp_BIO_set_retry_read(bio)
      return -1
    }
    return Int32(copied)
  }
  _ = BIO_meth_set_write(method) { bio, source, count in
    pp_BIO_clear_retry_flags(bio)
    guard let source, count > 0 else { return 0 }
    state(bio).pointee.output.append(UnsafeRawBufferPointer(start: source, count: Int(count)))
    return count
  }
  _ = BIO_meth_set_ctrl(method) { bio, command, _, _ in
    switch command {
    // Output is taken by the channel after each call; nothing to push.
    case BIO_CTRL_FLUSH: return 1
    case BIO_CTRL_PENDING: return state(bio).pointee.unreadInput
    case BIO_CTRL_WPENDING: return state(bio).pointee.output.unread
    default: return 0
    }
  }
  return method
}()
