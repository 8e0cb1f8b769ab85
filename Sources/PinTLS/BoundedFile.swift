import Foundation

/// Reads a file only up to a bound: a file the proxy loads (anchors, keys,
/// CT log lists, stored pin lists) is never read whole before its size is
/// judged, so a wrong path to a huge file costs no memory.
public enum BoundedFile {
  public enum Failure: Error, Equatable, CustomStringConvertible {
    case unreadable
    case tooLarge(limit: Int)

    public var description: String {
      switch self {
      case .unreadable: "cannot read file (missing, permission denied or not a regular file)"
      case .tooLarge(let limit): "larger than \(limit) bytes"
      }
    }
  }

  /// The whole file when it is at most `limit` bytes.
  public static func read(_ path: String, limit: Int) throws(Failure) -> [UInt8] {
    guard let handle = FileHandle(forReadingAtPath: path) else { throw .unreadable }
    defer { try? handle.close() }
    let data: Data?
    do {
      data = try handle.read(upToCount: limit + 1)
    } catch {
      throw .unreadable
    }
    let bytes = [UInt8](data ?? Data())
    guard bytes.count <= limit else { throw .tooLarge(limit: limit) }
    return bytes
  }
}
