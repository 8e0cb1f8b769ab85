import Glibc

/// Reads a file only up to a bound: a file the proxy loads (anchors, keys,
/// CT log lists, stored pin lists, credentials, the state files) is never
/// read whole before its size is judged, so a wrong path to a huge file
/// costs no memory.
///
/// Only a regular file is read. The path is opened without blocking
/// (`O_NONBLOCK`: opening a FIFO with no writer would otherwise wait for
/// one forever) and judged by what was opened (`fstat`), not by a look at
/// the path before: a FIFO, a device, a socket or a directory put where a
/// file should be is refused at once, naming what it is. A symbolic link
/// is followed (a Kubernetes ConfigMap is links all the way down); what it
/// leads to is judged.
public enum BoundedFile {
  public enum Failure: Error, Equatable, CustomStringConvertible {
    /// Missing, or not readable by this process: `reason` is the system's word.
    case unreadable(reason: String)
    /// Something other than a regular file: `kind` says what.
    case notARegularFile(kind: String)
    case tooLarge(limit: Int)

    public var description: String {
      switch self {
      case .unreadable(let reason): "cannot read file (\(reason))"
      case .notARegularFile(let kind): "cannot read file: it is \(kind), not a regular file"
      case .tooLarge(let limit): "larger than \(limit) bytes"
      }
    }
  }

  /// The whole file when it is at most `limit` bytes.
  public static func read(_ path: String, limit: Int) throws(Failure) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    guard fd >= 0 else { throw .unreadable(reason: reason(errno)) }
    defer { close(fd) }
    var status = stat()
    guard fstat(fd, &status) == 0 else { throw .unreadable(reason: reason(errno)) }
    if let kind = kind(of: status.st_mode) { throw .notARegularFile(kind: kind) }
    // Read to the end (a /proc file says size 0), one byte past the bound,
    // into one buffer sized by what fstat says and doubled when that was
    // short. The kernel and memcpy move the bytes: an append element by
    // element cost an unoptimised build 1.2 billion instructions for the
    // system's CA bundle, most of a daemon's start.
    let bound = limit == Int.max ? limit : limit + 1
    var capacity = min(bound, max(Int(status.st_size) + 1, 4096))
    var buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
    defer { buffer.deallocate() }
    var filled = 0
    while filled < bound {
      if filled == capacity {
        let larger = capacity > bound / 2 ? bound : capacity * 2
        let moved = UnsafeMutableRawPointer.allocate(byteCount: larger, alignment: 1)
        moved.copyMemory(from: buffer, byteCount: filled)
        buffer.deallocate()
        buffer = moved
        capacity = larger
      }
      let count = Glibc.read(fd, buffer + filled, capacity - filled)
      if count < 0 {
        let failure = errno
        if failure == EINTR { continue }
        throw .unreadable(reason: reason(failure))
      }
      if count == 0 { break }
      filled += count
    }
    guard filled <= limit else { throw .tooLarge(limit: limit) }
    let source = buffer
    return [UInt8](unsafeUninitializedCapacity: filled) { target, initialized in
      if filled > 0 { memcpy(target.baseAddress!, source, filled) }
      initialized = filled
    }
  }

  /// What a file of mode `mode` is when it is not a regular file; nil when it is.
  public static func kind(of mode: mode_t) -> String? {
    switch mode & S_IFMT {
    case S_IFREG: nil
    case S_IFIFO: "a FIFO"
    case S_IFDIR: "a directory"
    case S_IFCHR: "a character device"
    case S_IFBLK: "a block device"
    case S_IFSOCK: "a socket"
    default: "not a regular file"
    }
  }

  private static func reason(_ code: Int32) -> String {
    switch code {
    case ENOENT: "no such file"
    case EACCES, EPERM: "permission denied"
    default: String(cString: strerror(code))
    }
  }
}
