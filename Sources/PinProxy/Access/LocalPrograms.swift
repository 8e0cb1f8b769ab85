import Foundation
import PinConfig
import PinEventLoop
import PinTLS
import PinTrust
import Synchronization

/// Finds the program behind a local peer's socket, off the event loops:
/// the process holding `socket:[INODE]` among its `/proc/PID/fd` links, its
/// executable's name (`/proc/PID/exe`, else `comm`) and pid, and the user's
/// name (`getpwuid_r`, which may ask NSS and so never runs on a loop).
///
/// Finding a process is a scan of `/proc`, so lookups wait in one bounded
/// set and one scan answers all of them; scans are at least
/// `scanInterval` apart, so a burst of new connections costs a few scans,
/// not one each. A process pinproxy may not inspect (another user's,
/// without CAP_SYS_PTRACE) leaves the program "unknown", as `ss -p` does.
final class LocalPrograms: Sendable {
  /// One per process: every listener's local peers share the scans.
  static let shared = LocalPrograms()

  private struct State {
    /// In the order asked; a scan takes them all (one array, not a list
    /// per socket: a socket has one peer).
    var waiting: [LocalPeer] = []
    var scanScheduled = false
    var lastScan: UInt64 = 0
    var lastWalk: UInt64 = 0
    var userNames: [UInt32: String] = [:]
    /// Processes that held a looked-up socket lately, most recent first:
    /// an app that connects again and again is found in the first
    /// directory read, not after a walk over every process.
    var recentProcesses: [Int32] = []
    /// Someone waits on a lookup (a refused client's answer): the next
    /// walk comes after `urgentWalkInterval`, not `walkInterval`.
    var urgent = false
    var urgentScanScheduled = false
  }
  private let state = Locked<State>(State())
  /// Asks, on `queue`, whether a waiting peer's socket still exists: one
  /// that is gone has no process to find, and costs no walk over /proc.
  private let diag = SockDiagSocket()
  /// Soon, not in the background: a short-lived client may exit (and its
  /// `/proc` entry go) within milliseconds of its request.
  private let queue = DispatchQueue(label: "pinproxy.local-programs", qos: .userInitiated)
  /// Peers waiting for a scan; past it, a peer stays "unknown".
  static let maximumWaiting = 4096
  static let maximumUserNames = 1024
  static let maximumRecentProcesses = 16
  static let scanInterval: UInt64 = 10_000_000
  /// Listing every process is the costly part of a scan: at most this
  /// often. Between walks only the recent processes are read, and what they
  /// do not hold waits for the next walk.
  static let walkInterval: UInt64 = 250_000_000
  /// The same while a refused client's answer waits for a lookup: a
  /// flood of refusals still costs at most 40 walks a second.
  static let urgentWalkInterval: UInt64 = 25_000_000
  /// A scan reads at most this many processes and descriptors in all.
  static let maximumProcesses = 65536
  static let maximumDescriptorsPerScan = 1 << 20

  /// Asks for `peer`'s program and user name, once per peer; returns at
  /// once. `urgent`: something waits on the answer (see `urgentWalkInterval`).
  func lookUp(_ peer: LocalPeer, urgent: Bool = false) {
    guard peer.uid != nil else { return }
    if urgent { hurry() }
    guard peer.markAsked() else { return }
    let first: Bool? = state.withLock { state in
      guard state.waiting.count < LocalPrograms.maximumWaiting else { return nil }
      state.waiting.append(peer)
      guard !state.scanScheduled else { return false }
      state.scanScheduled = true
      return true
    }
    guard let first else {
      // Too many waiting: this one stays unknown rather than queue unbounded.
      return peer.record(user: nil, program: nil, pid: nil)
    }
    guard first else { return }
    let wait = state.withLock { state -> UInt64 in
      let now = DispatchTime.now().uptimeNanoseconds
      let due = state.lastScan &+ LocalPrograms.scanInterval
      return state.lastScan == 0 || now >= due ? 0 : due - now
    }
    schedule(after: wait)
  }

  /// Brings the next walk forward to `urgentWalkInterval` after the last.
  private func hurry() {
    let wait: UInt64? = state.withLock { state in
      state.urgent = true
      guard !state.urgentScanScheduled else { return nil }
      state.urgentScanScheduled = true
      let now = DispatchTime.now().uptimeNanoseconds
      let due = max(
        state.lastScan &+ LocalPrograms.scanInterval, state.lastWalk &+ LocalPrograms.urgentWalkInterval)
      return state.lastWalk == 0 || now >= due ? 0 : due - now
    }
    if let wait { schedule(after: wait) }
  }

  private func schedule(after nanoseconds: UInt64) {
    // At once without a timer: a refused client may close within a
    // millisecond of its answer, and its process is looked for now.
    guard nanoseconds > 0 else { return queue.async { [self] in scan() } }
    queue.asyncAfter(deadline: .now() + .nanoseconds(Int(nanoseconds))) { [self] in scan() }
  }

  private func scan() {
    dispatchPrecondition(condition: .onQueue(queue))
    let now = DispatchTime.now().uptimeNanoseconds
    let (taken, recent, walk, urgent) = state.withLock { state in
      defer {
        state.waiting = []
        state.scanScheduled = false
        state.urgentScanScheduled = false
        state.urgent = false
        state.lastScan = now
      }
      let interval = state.urgent ? LocalPrograms.urgentWalkInterval : LocalPrograms.walkInterval
      let walk = state.lastWalk == 0 || now &- state.lastWalk >= interval
      if walk { state.lastWalk = now }
      return (state.waiting, state.recentProcesses, walk, state.urgent)
    }
    // A socket that is gone has no process to find: its peer is answered
    // with the user alone, and the rest are looked for.
    var waiting: [LocalPeer] = []
    for peer in taken {
      if let diag, let tuple = peer.tuple, diag.owner(of: tuple)?.inode != peer.inode {
        peer.record(user: peer.uid.map(userName), program: nil, pid: nil)
      } else {
        waiting.append(peer)
      }
    }
    var later: [LocalPeer] = []
    if !waiting.isEmpty {
      let found = LocalPrograms.processes(
        holding: Set(waiting.lazy.map(\.inode)), ownedBy: Set(waiting.lazy.compactMap(\.uid)), recent: recent,
        walkAll: walk)
      for peer in waiting {
        let process = found[peer.inode]
        // Not in a recent process: the next walk looks for it.
        if process == nil && !walk {
          later.append(peer)
          continue
        }
        peer.record(user: peer.uid.map(userName), program: process?.program ?? "unknown", pid: process?.pid)
      }
      state.withLock { state in
        var seen = Set<Int32>()
        state.recentProcesses = Array(
          (found.values.map(\.pid) + state.recentProcesses).filter { seen.insert($0).inserted }
            .prefix(LocalPrograms.maximumRecentProcesses))
      }
    }
    guard !later.isEmpty else { return }
    let wait: UInt64? = state.withLock { state in
      state.waiting += later
      if urgent { state.urgent = true }
      guard !state.scanScheduled else { return nil }
      state.scanScheduled = true
      let due =
        state.lastWalk &+ (state.urgent ? LocalPrograms.urgentWalkInterval : LocalPrograms.walkInterval)
      return due > now ? due - now : 0
    }
    if let wait { schedule(after: wait) }
  }

  private func userName(_ uid: UInt32) -> String {
    if let known = state.withLock({ $0.userNames[uid] }) { return known }
    let name = LocalUsers.name(of: uid) ?? String(uid)
    state.withLock { state in
      if state.userNames.count >= LocalPrograms.maximumUserNames { state.userNames = [:] }
      state.userNames[uid] = name
    }
    return name
  }

  /// One pass over `/proc`: for each wanted socket inode, the process
  /// holding it. Only processes of the sockets' owners are opened (a
  /// socket's process runs as its owner, but for a descriptor passed on),
  /// newest first (a client that just connected was likely just started);
  /// stops when every inode is found or a bound is reached. `recent`
  /// processes are read first, and only then (if `walkAll`) is `/proc` listed.
  static func processes(
    holding inodes: Set<UInt32>, ownedBy owners: Set<UInt32>, recent: [Int32] = [], walkAll: Bool = true
  ) -> [UInt32: (pid: Int32, program: String)] {
    guard !inodes.isEmpty else { return [:] }
    var found: [UInt32: (pid: Int32, program: String)] = [:]
    let own = getpid()
    var descriptors = 0
    for pid in recent where pid != own && found.count < inodes.count {
      descriptors += readDescriptors(of: pid, owners: owners, inodes: inodes, into: &found)
    }
    // Only then every other process: listing /proc is the costly part.
    let others =
      walkAll && found.count < inodes.count ? processIDs().reversed().filter { !recent.contains($0) } : []
    for pid in others where pid != own {
      guard found.count < inodes.count, descriptors < maximumDescriptorsPerScan else { break }
      descriptors += readDescriptors(of: pid, owners: owners, inodes: inodes, into: &found)
    }
    return found
  }

  /// Reads one process's descriptors for the wanted socket inodes, if it
  /// runs as one of `owners`; returns how many descriptors it read.
  private static func readDescriptors(
    of pid: Int32, owners: Set<UInt32>, inodes: Set<UInt32>,
    into found: inout [UInt32: (pid: Int32, program: String)]
  ) -> Int {
    var status = stat()
    guard stat("/proc/\(pid)", &status) == 0, owners.contains(status.st_uid),
      let fds = opendir("/proc/\(pid)/fd")
    else { return 0 }
    defer { closedir(fds) }
    let directory = dirfd(fds)
    var program: String?
    var descriptors = 0
    while descriptors < maximumDescriptorsPerScan, let entry = readdir(fds) {
      descriptors += 1
      guard let inode = socketInode(at: directory, entry), inodes.contains(inode) else { continue }
      program = program ?? programName(pid)
      found[inode] = (pid, program ?? "unknown")
    }
    return descriptors
  }

  /// The numeric entries of `/proc`, ascending, at most `maximumProcesses`.
  static func processIDs() -> [Int32] {
    guard let proc = opendir("/proc") else { return [] }
    defer { closedir(proc) }
    var pids: [Int32] = []
    while pids.count < maximumProcesses, let entry = readdir(proc) {
      if let pid = Int32(entryName(entry)) { pids.append(pid) }
    }
    return pids.sorted()
  }

  /// `socket:[12345]` → 12345.
  static func socketInode(_ link: String) -> UInt32? {
    var link = link
    return link.withUTF8 { socketInode(bytes: $0) }
  }

  /// The same from the link's bytes: decimal digits only, within UInt32.
  static func socketInode(bytes: UnsafeBufferPointer<UInt8>) -> UInt32? {
    let prefix: StaticString = "socket:["
    let start = prefix.utf8CodeUnitCount
    guard bytes.count > start + 1, bytes.count <= start + 11, bytes[bytes.count - 1] == UInt8(ascii: "]"),
      prefix.withUTF8Buffer({ $0.elementsEqual(bytes[..<start]) })
    else { return nil }
    var value: UInt64 = 0
    for byte in bytes[start..<(bytes.count - 1)] {
      guard byte >= 0x30 && byte <= 0x39 else { return nil }
      value = value * 10 + UInt64(byte - 0x30)
    }
    return value <= UInt64(UInt32.max) ? UInt32(value) : nil
  }

  /// The socket inode a descriptor entry of `/proc/PID/fd` links to, read
  /// relative to the open directory: per descriptor, one readlinkat and no
  /// path or String made (a scan reads every descriptor of a process).
  /// `.` and `..` are not links: nil.
  private static func socketInode(at directory: Int32, _ entry: UnsafeMutablePointer<dirent>) -> UInt32? {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { buffer in
      let count = withUnsafeBytes(of: &entry.pointee.d_name) { name in
        readlinkat(
          directory, name.baseAddress!.assumingMemoryBound(to: CChar.self), buffer.baseAddress!, buffer.count)
      }
      guard count > 0, count < buffer.count else { return nil }
      return socketInode(
        bytes: UnsafeBufferPointer(
          start: UnsafeRawPointer(buffer.baseAddress!).assumingMemoryBound(to: UInt8.self), count: count))
    }
  }

  /// The executable's file name, else the kernel's short name (`comm`).
  static func programName(_ pid: Int32) -> String? {
    if let exe = link("/proc/\(pid)/exe") {
      let name = exe.split(separator: "/").last.map(String.init) ?? exe
      // A replaced binary reads "name (deleted)".
      return String((name.hasSuffix(" (deleted)") ? String(name.dropLast(10)) : name).prefix(64))
    }
    guard let comm = try? BoundedFile.read("/proc/\(pid)/comm", limit: 64) else { return nil }
    let text = String(decoding: comm, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return text.isEmpty ? nil : text
  }

  private static func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
    withUnsafeBytes(of: entry.pointee.d_name) { raw in
      String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
    }
  }

  private static func link(_ path: String) -> String? {
    withUnsafeTemporaryAllocation(of: CChar.self, capacity: 4096) { buffer in
      let count = readlink(path, buffer.baseAddress!, buffer.count)
      guard count > 0 else { return nil }
      return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress!, count: count), as: UTF8.self)
    }
  }
}
