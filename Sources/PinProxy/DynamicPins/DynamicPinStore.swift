import Foundation
import PinTLS
import PinTrust
import Synchronization

/// The list one rule enforces, shared by every loop: read on each upstream
/// handshake (`requirement`), replaced whole by a verified update, kept in
/// a file so that a restart without network keeps working.
///
/// Thread-safe: the state is behind one lock; the version counter is global,
/// so versions are unique across stores and only grow (`PolicyIdentity.pinList`).
public final class DynamicPinStore: Sendable {
  public let spec: DynamicPinSpec

  public struct State: Sendable {
    public var list: PinList
    public var version: UInt64
    public var lastSuccess: Date?
    public var nextUpdate: Date
    public var consecutiveFailures = 0
    public var lastFailure: String?
  }

  private let state: Locked<State>
  private static let versions = Atomic<UInt64>(0)

  static func nextVersion() -> UInt64 { versions.add(1, ordering: .relaxed).newValue }

  /// Loads the stored list, else the fallback, else nothing.
  /// - Parameter warn: told why a stored file was ignored.
  init(spec: DynamicPinSpec, at time: Date, warn: (String) -> Void) {
    self.spec = spec
    var list = PinList.empty
    if let stored = DynamicPinStore.load(spec, at: time, warn: warn) {
      list = stored
    } else if let fallback = spec.fallback {
      list = PinListUpdate.fallback(fallback, at: time)
    }
    // A stored list is used at once; it is fetched again on its schedule,
    // and without one, now.
    let next =
      list.source == .stored
      ? PinListSchedule.nextUpdate(
        for: list.entries, interval: spec.updateInterval, threshold: spec.expirationUpdateThreshold, at: time)
      : time
    state = Locked(
      State(list: list, version: DynamicPinStore.nextVersion(), lastSuccess: list.updated, nextUpdate: next))
  }

  public var snapshot: State { state.withLock { $0 } }
  public var version: UInt64 { state.withLock { $0.version } }

  /// The list in force and its version, for one trust decision.
  public func requirement() -> (DynamicPinRequirement, version: UInt64) {
    state.withLock { state in
      (DynamicPinRequirement(list: state.list, expectedCommonNames: spec.expectedCommonNames), state.version)
    }
  }

  /// Installs a verified update: written to the file first (temp file, fsync,
  /// rename), then swapped in; under a new version only when its entries
  /// differ (an unchanged list keeps cached verdicts and pooled
  /// connections). A write failure is returned and the update is still used
  /// in memory: refusing a verified list for a disk problem would help no one.
  @discardableResult
  func install(_ list: PinList, at time: Date) -> (previous: PinList, writeError: String?) {
    let writeError = DynamicPinStore.write(list.document.json(), to: spec.file)
    return (replace(with: list, succeeded: time, at: time), writeError)
  }

  /// Swaps `list` in (a new version only when its entries differ) and
  /// schedules the next fetch from it; returns the list it replaced.
  private func replace(with list: PinList, succeeded: Date?, at time: Date) -> PinList {
    let next = PinListSchedule.nextUpdate(
      for: list.entries, interval: spec.updateInterval, threshold: spec.expirationUpdateThreshold, at: time)
    return state.withLock { state in
      let previous = state.list
      state.list = list
      if previous.entries != list.entries { state.version = DynamicPinStore.nextVersion() }
      state.lastSuccess = succeeded
      state.nextUpdate = next
      state.consecutiveFailures = 0
      state.lastFailure = nil
      return previous
    }
  }

  /// Records a failed update; returns when to try again.
  func recordFailure(_ description: String, at time: Date) -> Date {
    state.withLock { state in
      state.consecutiveFailures += 1
      state.lastFailure = description
      let delay = PinListSchedule.retryDelay(
        afterFailures: state.consecutiveFailures, interval: spec.updateInterval)
      state.nextUpdate = time.addingTimeInterval(delay)
      return state.nextUpdate
    }
  }

  /// Re-reads the file when another process (`pinproxy pins update`) stored
  /// a newer list than the one in force; true when it did.
  func reloadIfNewer(at time: Date, warn: (String) -> Void) -> Bool {
    guard let stored = DynamicPinStore.load(spec, at: time, warn: warn), let updated = stored.updated else {
      return false
    }
    if let mine = snapshot.list.updated, mine >= updated { return false }
    replace(with: stored, succeeded: updated, at: time)
    return true
  }

  /// The stored list, or nil (absent, unreadable, or failing its
  /// signatures: a corrupt file is reported through `warn` and ignored).
  static func load(_ spec: DynamicPinSpec, at time: Date, warn: (String) -> Void) -> PinList? {
    guard FileManager.default.fileExists(atPath: spec.file) else { return nil }
    // The same bound as a fetched list (`InternalRequest.defaultMaximumBodyBytes`).
    guard let data = try? BoundedFile.read(spec.file, limit: InternalRequest.defaultMaximumBodyBytes) else {
      warn("\(spec.file): cannot read the stored pin list, or it is too large; ignored")
      return nil
    }
    let document: PinListDocument
    do {
      document = try PinListDocument.parse(data, signedEntries: !spec.useChallenge)
    } catch {
      warn("\(spec.file): the stored pin list is corrupt (\(error.description)); ignored")
      return nil
    }
    // v1 entries carry their signatures: checked again, so a file edited by
    // hand or damaged on disk is not trusted.
    if !spec.useChallenge {
      for entry in document.entries {
        guard let signature = entry.signature,
          spec.verifier.isValid(signature: signature, over: entry.signedMessage)
        else {
          warn(
            "\(spec.file): a stored entry for \(entry.name) fails its signature; the stored list is ignored")
          return nil
        }
      }
    }
    return PinList(
      entries: document.entries.filter { !$0.isExpired(at: time) }, source: .stored,
      timestamp: document.timestamp,
      domainsConfig: document.domainsConfig,
      updated: document.updated.map { Date(timeIntervalSince1970: Double($0)) })
  }

  /// Atomic replacement: a reader sees the old file or the new one, never
  /// half of either, and a crash leaves one of them on disk.
  static func write(_ bytes: [UInt8], to path: String) -> String? {
    let directory = (path as NSString).deletingLastPathComponent
    do {
      try FileManager.default.createDirectory(
        atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    } catch {
      return "cannot create \(directory): \(error.localizedDescription)"
    }
    let temporary = path + ".tmp-\(getpid())"
    // A fresh file of our own: whatever sits at the name (a leftover, a
    // FIFO or a link someone put there) is removed, never opened.
    unlink(temporary)
    let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return "cannot create \(temporary): \(String(cString: strerror(errno)))" }
    var written = 0
    let ok = bytes.withUnsafeBytes { raw -> Bool in
      while written < raw.count {
        let count = Glibc.write(fd, raw.baseAddress! + written, raw.count - written)
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { return false }
        written += count
      }
      return fsync(fd) == 0
    }
    let error = String(cString: strerror(errno))
    close(fd)
    guard ok else {
      unlink(temporary)
      return "cannot write \(temporary): \(error)"
    }
    guard rename(temporary, path) == 0 else {
      let renameError = String(cString: strerror(errno))
      unlink(temporary)
      return "cannot rename \(temporary) to \(path): \(renameError)"
    }
    // The rename itself is durable once the directory is synced.
    let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if directoryFD >= 0 {
      fsync(directoryFD)
      close(directoryFD)
    }
    return nil
  }
}
