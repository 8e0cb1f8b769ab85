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
    // Read to the end (a /proc file says size 0), one byte past the bound.
    var bytes: [UInt8] = []
    let chunk = min(limit + 1, 64 * 1024)
    while bytes.count <= limit {
      let before = bytes.count
      let want = min(chunk, limit + 1 - before)
      var failure: Int32 = 0
      bytes.append(contentsOf: repeatElement(0, count: want))
      let count = bytes.withUnsafeMutableBytes { raw -> Int in
        let result = Glibc.read(fd, raw.baseAddress! + before, want)
        if result < 0 { failure = errno }
        return result
      }
      if count < 0 {
        if failure == EINTR {
          bytes.removeLast(want)
          continue
        }
        throw .unreadable(reason: reason(failure))
      }
      bytes.removeLast(want - count)
      if count == 0 { break }
    }
    guard bytes.count <= limit else { throw .tooLarge(limit: limit) }
    return bytes
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
