import Foundation
import PinConfig
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
    var waiting: [UInt32: [LocalPeer]] = [:]
    var waitingCount = 0
    var scanScheduled = false
    var lastScan: UInt64 = 0
    var userNames: [UInt32: String] = [:]
  }
  private let state = Mutex<State>(State())
  /// Soon, not in the background: a short-lived client may exit (and its
  /// `/proc` entry go) within milliseconds of its request.
  private let queue = DispatchQueue(label: "pinproxy.local-programs", qos: .userInitiated)
  /// Peers waiting for a scan; past it, a peer stays "unknown".
  static let maximumWaiting = 4096
  static let maximumUserNames = 1024
  static let scanInterval: UInt64 = 50_000_000
  /// A scan reads at most this many processes and descriptors in all.
  static let maximumProcesses = 65536
  static let maximumDescriptorsPerScan = 1 << 20

  /// Asks for `peer`'s program and user name, once per peer; returns at once.
  func lookUp(_ peer: LocalPeer) {
    guard peer.uid != nil, peer.markAsked() else { return }
    let schedule: Bool? = state.withLock { state in
      guard state.waitingCount < LocalPrograms.maximumWaiting else { return nil }
      state.waiting[peer.inode, default: []].append(peer)
      state.waitingCount += 1
      guard !state.scanScheduled else { return false }
      state.scanScheduled = true
      return true
    }
    guard let schedule else {
      // Too many waiting: this one stays unknown rather than queue unbounded.
      return peer.record(user: nil, program: nil, pid: nil)
    }
    guard schedule else { return }
    let wait = state.withLock { state -> UInt64 in
      let now = DispatchTime.now().uptimeNanoseconds
      let due = state.lastScan &+ LocalPrograms.scanInterval
      return state.lastScan == 0 || now >= due ? 0 : due - now
    }
    queue.asyncAfter(deadline: .now() + .nanoseconds(Int(wait))) { [self] in scan() }
  }

  private func scan() {
    dispatchPrecondition(condition: .onQueue(queue))
    let waiting = state.withLock { state -> [UInt32: [LocalPeer]] in
      defer {
        state.waiting = [:]
        state.waitingCount = 0
        state.scanScheduled = false
        state.lastScan = DispatchTime.now().uptimeNanoseconds
      }
      return state.waiting
    }
    let owners = Set(waiting.values.compactMap { $0.first?.uid })
    let found = LocalPrograms.processes(holding: Set(waiting.keys), ownedBy: owners)
    for (inode, peers) in waiting {
      let process = found[inode]
      for peer in peers {
        let user = peer.uid.map(userName)
        peer.record(user: user, program: process?.program ?? "unknown", pid: process?.pid)
      }
    }
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
  /// stops when every inode is found or a bound is reached.
  static func processes(holding inodes: Set<UInt32>, ownedBy owners: Set<UInt32>) -> [UInt32: (
    pid: Int32, program: String
  )] {
    guard !inodes.isEmpty else { return [:] }
    var found: [UInt32: (pid: Int32, program: String)] = [:]
    let own = getpid()
    var descriptors = 0
    for pid in processIDs().reversed() where pid != own {
      guard found.count < inodes.count, descriptors < maximumDescriptorsPerScan else { break }
      var status = stat()
      guard stat("/proc/\(pid)", &status) == 0, owners.contains(status.st_uid) else { continue }
      guard let fds = opendir("/proc/\(pid)/fd") else { continue }
      defer { closedir(fds) }
      var program: String?
      while descriptors < maximumDescriptorsPerScan, let fd = readdir(fds) {
        descriptors += 1
        let name = entryName(fd)
        guard name.first != ".", let target = link("/proc/\(pid)/fd/\(name)"),
          let inode = socketInode(target), inodes.contains(inode)
        else { continue }
        program = program ?? programName(pid)
        found[inode] = (pid, program ?? "unknown")
      }
    }
    return found
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
    guard link.hasPrefix("socket:["), link.hasSuffix("]") else { return nil }
    return UInt32(link.dropFirst(8).dropLast())
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
