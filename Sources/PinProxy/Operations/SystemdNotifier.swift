import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// sd_notify(3) without libsystemd: datagrams to $NOTIFY_SOCKET (a path, or
/// an abstract socket when it starts with "@"). Without the variable every
/// call does nothing, so the same binary runs outside systemd.
public final class SystemdNotifier: Sendable {
  private let socketPath: String?

  public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
    socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
  }

  public var isActive: Bool { socketPath != nil }

  public func ready(status: String) { send("READY=1\nSTATUS=\(status)") }

  /// RELOADING=1 needs the monotonic time of the reload's start (systemd ≥ 253).
  public func reloading() {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    let microseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    send("RELOADING=1\nMONOTONIC_USEC=\(microseconds)\nSTATUS=reloading configuration")
  }

  public func stopping(status: String) { send("STOPPING=1\nSTATUS=\(status)") }

  public func status(_ text: String) { send("STATUS=\(text)") }

  func send(_ message: String) {
    guard let socketPath else { return }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    var path = Array(socketPath.utf8)
    if path.first == UInt8(ascii: "@") { path[0] = 0 }
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard path.count < capacity else { return }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      raw.copyBytes(from: path)
    }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + path.count)
    let bytes = Array(message.utf8)
    _ = withUnsafePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
        bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, 0, target, length) }
      }
    }
  }
}
