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

  struct Seen: Sendable {
    var stamp: [Int] = []
    var sightings: [IssuanceSighting] = []
    var problem: String?
  }

  private let timer = BackgroundTimer(label: "pinproxy.ct-sightings")
  private let state = Locked(Seen())
  private let directory: @Sendable () -> String
  private let logger: ProxyLogger?

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
    let path = IssuanceLog.path(stateDirectory: directory())
    var info = stat()
    let stamp =
      stat(path, &info) == 0
      ? [Int(info.st_ino), Int(info.st_size), Int(info.st_ctim.tv_sec), Int(info.st_ctim.tv_nsec)] : []
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
