import Foundation

/// `run --ready-file PATH`: a file that exists exactly while the daemon
/// accepts connections, so that a script can wait for it instead of guessing
/// with `sleep` (the first start, which creates the local CA, can take over a
/// second). Outside systemd this is what READY=1 is under it.
struct ReadyFile {
  let path: String

  /// Removes a file an earlier run left behind (killed, say), so a waiter
  /// never takes it for this run's, and refuses a path that could not be
  /// written, before anything is bound.
  init(_ path: String) throws(UsageError) {
    self.path = path
    if unlink(path) != 0 && errno != ENOENT {
      throw UsageError(
        "--ready-file \(path): cannot remove the old file: \(String(cString: strerror(errno)))")
    }
    let directory = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
    if access(directory.isEmpty ? "/" : directory, W_OK) != 0 {
      throw UsageError("--ready-file \(path): directory not writable: \(String(cString: strerror(errno)))")
    }
  }

  /// `pid N`, then `listener NAME ADDRESS` per listener and `admin ADDRESS`.
  /// Written beside the path and renamed onto it: whoever sees the file sees
  /// all of it.
  func write(listeners: [(name: String, address: String)], admin: String?) throws(UsageError) {
    var text = "pid \(getpid())\n"
    for (name, address) in listeners { text += "listener \(name) \(address)\n" }
    if let admin { text += "admin \(admin)\n" }
    let temporary = path + ".tmp"
    guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8)),
      rename(temporary, path) == 0
    else {
      let reason = String(cString: strerror(errno))
      unlink(temporary)
      throw UsageError("--ready-file \(path): \(reason)")
    }
  }

  /// Once the listeners are closed: the daemon no longer accepts.
  func remove() { unlink(path) }
}
