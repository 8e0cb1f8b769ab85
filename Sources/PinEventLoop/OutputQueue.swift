#if canImport(Glibc)
  import Glibc
#endif

/// A socket's unsent output, in order, copied only where it must be.
///
/// An array handed over whole (a response body event, a serialized head) is
/// queued as that array: it is a value, nobody can change it under the
/// queue, so holding it costs a reference, not a copy. Bytes in a buffer the
/// caller reuses (TLS records from the loop's output buffer), and small
/// arrays, are copied into a piece of the queue's own, appended to in place.
/// What is queued leaves in one `writev` per call, so a corked response head
/// and body still go out in one syscall.
struct OutputQueue {
  /// Arrays up to this size are copied into the queue's own piece: cheaper
  /// than one more piece (and iovec) per tiny write.
  static let smallArray = 1024
  /// The queue's own piece stops growing here and a new one begins, so a
  /// large backlog is released piece by piece as it is written, never
  /// moved to the front.
  static let ownPieceLimit = 256 * 1024
  /// Pieces per `writev`: a few pieces already fill a socket buffer.
  static let piecesPerWrite = 16

  private var pieces: [[UInt8]] = []
  /// Pieces before this one are written (and released).
  private var first = 0
  /// Bytes of `pieces[first]` already written.
  private var offset = 0
  /// The last piece was copied in by the queue, so it may be appended to.
  private var lastIsOwn = false
  /// Bytes not yet written.
  private(set) var count = 0
  /// The queue's last own piece, emptied once written and kept for the next
  /// one: a keep-alive connection's corked responses reuse one buffer
  /// instead of allocating one each.
  private var spare: [UInt8] = []
  /// A larger own piece is released once written rather than kept.
  static let spareLimit = 16 * 1024

  var isEmpty: Bool { count == 0 }

  /// Queues `bytes` from `start` on (the bytes before it were written at once).
  mutating func append(_ bytes: [UInt8], from start: Int = 0) {
    guard start < bytes.count else { return }
    if bytes.count - start <= Self.smallArray {
      return bytes.withUnsafeBytes { append(UnsafeRawBufferPointer(rebasing: $0[start...])) }
    }
    if isEmpty { offset = start }
    precondition(start == 0 || offset == start, "only the first piece may start part-written")
    pieces.append(bytes)
    lastIsOwn = false
    count += bytes.count - start
  }

  /// Copies `bytes`, which the caller will reuse.
  mutating func append(_ bytes: UnsafeRawBufferPointer) {
    guard !bytes.isEmpty else { return }
    if lastIsOwn, pieces[pieces.count - 1].count < Self.ownPieceLimit {
      pieces[pieces.count - 1].append(contentsOf: bytes)
    } else {
      var piece: [UInt8] = []
      swap(&piece, &spare)
      if piece.capacity < bytes.count { piece.reserveCapacity(max(bytes.count, 4096)) }
      piece.append(contentsOf: bytes)
      pieces.append(piece)
      lastIsOwn = true
    }
    count += bytes.count
  }

  /// One `writev` of what is queued; returns what it returned (-1 with
  /// `errno` set on failure) and forgets what was written.
  mutating func write(to fd: Int32) -> Int {
    guard !isEmpty else { return 0 }
    let written = withUnsafeTemporaryAllocation(of: iovec.self, capacity: Self.piecesPerWrite) { vectors in
      gather(pieces: first, into: vectors, filled: 0, fd: fd)
    }
    if written > 0 { forget(written) }
    return written
  }

  /// Drops everything queued (the socket closed).
  mutating func removeAll() {
    pieces = []
    spare = []
    first = 0
    offset = 0
    lastIsOwn = false
    count = 0
  }

  /// Points one iovec at each piece from `index` on, inside the pieces'
  /// `withUnsafeBytes` (nested, so every pointer stays valid), then writes.
  private func gather(
    pieces index: Int, into vectors: UnsafeMutableBufferPointer<iovec>, filled: Int, fd: Int32
  ) -> Int {
    guard index < pieces.count, filled < vectors.count else {
      return Glibc.writev(fd, vectors.baseAddress, Int32(filled))
    }
    return pieces[index].withUnsafeBytes { raw in
      let skip = index == first ? offset : 0
      vectors[filled] = iovec(
        iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress! + skip), iov_len: raw.count - skip)
      return gather(pieces: index + 1, into: vectors, filled: filled + 1, fd: fd)
    }
  }

  private mutating func forget(_ written: Int) {
    count -= written
    var left = written
    while left > 0 {
      let unwritten = pieces[first].count - offset
      if left < unwritten {
        offset += left
        return
      }
      left -= unwritten
      var written: [UInt8] = []
      swap(&written, &pieces[first])
      if lastIsOwn && first == pieces.count - 1 && written.capacity <= Self.spareLimit && spare.capacity == 0
      {
        // The only reference now: emptied in place, its storage kept.
        written.removeAll(keepingCapacity: true)
        spare = written
      }
      first += 1
      offset = 0
    }
    if first == pieces.count {
      // Everything written: an idle connection keeps no storage but a short list.
      pieces.removeAll(keepingCapacity: pieces.capacity <= 16)
      first = 0
      lastIsOwn = false
    } else if first >= 64 {
      pieces.removeFirst(first)
      first = 0
    }
  }
}
