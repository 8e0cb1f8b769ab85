import Foundation
import PinTrust

/// Follows the sightings file `pinproxy ct-hook` writes, so the running
/// daemon shows a new unpinned issuance within `interval` seconds, without
/// a reload: each tick compares the file's identity (inode, size, change
/// time) with the last one read and reads it again only when it moved.
/// The state directory is the current snapshot's, so a reload that moves
/// it is followed too. A file that cannot be read keeps what was read last
/// (and says why in `problem`, logged as `ct-sightings-unreadable` once
/// per change of the file). The file is opened without blocking: a FIFO
/// put there is refused at once, never waited on.
final class IssuanceWatch: Sendable {
  static let interval: TimeInterval = 2

  /// A file's identity as `stat` gives it; all zero when there is none.
  /// Four integers, not an array: the tick that finds nothing moved makes
  /// no allocation.
  struct Stamp: Equatable, Sendable {
    var inode = 0, size = 0, changeSeconds = 0, changeNanoseconds = 0
  }

  struct Seen: Sendable {
    var stamp: Stamp? = nil
    var sightings: [IssuanceSighting] = []
    var problem: String?
  }

  private let timer = BackgroundTimer(label: "pinproxy.ct-sightings")
  private let state = Locked(Seen())
  private let directory: @Sendable () -> String
  private let logger: ProxyLogger?
  /// On `timer.queue`: the state directory of the last tick and its
  /// sightings path, so the path is built once per directory.
  nonisolated(unsafe) private var lastPath: (directory: String, path: String)?

  init(logger: ProxyLogger? = nil, stateDirectory: @escaping @Sendable () -> String) {
    self.logger = logger
    directory = stateDirectory
  }

  var sightings: [IssuanceSighting] { state.withLock { $0.sightings } }

  func start() {
    timer.start(after: 0, repeating: Self.interval) { [weak self] in self?.tick() }
  }

  private func tick() {
    dispatchPrecondition(condition: .onQueue(timer.queue))
    let directory = directory()
    let path: String
    if let lastPath, lastPath.directory == directory {
      path = lastPath.path
    } else {
      path = IssuanceLog.path(stateDirectory: directory)
      lastPath = (directory, path)
    }
    var info = stat()
    let stamp =
      path.withCString { stat($0, &info) } == 0
      ? Stamp(
        inode: Int(info.st_ino), size: Int(info.st_size), changeSeconds: Int(info.st_ctim.tv_sec),
        changeNanoseconds: Int(info.st_ctim.tv_nsec)) : Stamp()
    guard stamp != state.withLock({ $0.stamp }) else { return }
    do {
      let sightings = try IssuanceLog.read(path)
      state.withLock { $0 = Seen(stamp: stamp, sightings: sightings, problem: nil) }
    } catch {
      state.withLock {
        $0.stamp = stamp
        $0.problem = error.description
      }
      logger?.log(
        .warning, "ct-sightings-unreadable",
        ["reason": error.description, "note": "the sightings read last are kept until the file can be read"])
    }
  }
}
