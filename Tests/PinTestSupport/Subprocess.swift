import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Runs a program to completion and captures its output.
public struct ProcessResult {
  public let status: Int32
  public let stdout: String
  public let stderr: String
}

public enum Subprocess {
  /// The `pinproxy` binary built beside the test bundle.
  public static var pinproxyPath: String {
    var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
    for _ in 0..<4 {
      let candidate = directory.appendingPathComponent("pinproxy").path
      if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
      directory.deleteLastPathComponent()
    }
    return Fixtures.repositoryRoot + "/.build/debug/pinproxy"
  }

  /// - Parameter directory: the working directory, or the test's own.
  public static func run(
    _ executable: String, _ arguments: [String], environment: [String: String] = [:],
    in directory: String? = nil
  ) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    if !environment.isEmpty {
      process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    // Read both pipes concurrently so a chatty child cannot block on a full pipe.
    // The semaphore orders the reader's write before this thread's read
    // (polling `isFinished` does not, as ThreadSanitizer says).
    nonisolated(unsafe) var errData = Data()
    let read = DispatchSemaphore(value: 0)
    let reader = Thread {
      errData = err.fileHandleForReading.readDataToEndOfFile()
      read.signal()
    }
    reader.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    read.wait()
    return ProcessResult(
      status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
      stderr: String(decoding: errData, as: UTF8.self))
  }

  public static func pinproxy(_ arguments: [String], environment: [String: String] = [:]) throws
    -> ProcessResult
  {
    try run(pinproxyPath, arguments, environment: environment)
  }
}

/// A real `openssl s_server` on 127.0.0.1, stopped when the test ends.
public final class OpenSSLServer {
  public let port: Int
  private let process: Process

  public init(certificate: String, key: String, chain: String? = nil, extra: [String] = []) throws {
    port = try OpenSSLServer.freePort()
    process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    var arguments = [
      "s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-www", "-quiet",
    ]
    if let chain { arguments += ["-cert_chain", chain] }
    process.arguments = arguments + extra
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    try waitUntilListening()
  }

  deinit { stop() }

  public func stop() {
    if process.isRunning {
      process.terminate()
      process.waitUntilExit()
    }
  }

  private func waitUntilListening() throws {
    for _ in 0..<200 {
      if OpenSSLServer.canConnect(port: port) { return }
      usleep(25_000)
    }
    throw NSError(
      domain: "OpenSSLServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "s_server did not start"])
  }

  public static func canConnect(port: Int) -> Bool {
    guard let fd = Loopback.connect(port: port) else { return false }
    close(fd)
    return true
  }

  /// A loopback port where a connection is refused for as long as this test
  /// process lives: bound and never listened on, so no other test running
  /// beside it can take the port (a port merely found free can be, and a
  /// "closed" upstream then answers).
  public static func closedPort() throws -> Int {
    // The descriptor stays open until the process exits: one test per process.
    try boundLoopbackSocket().port
  }

  /// Asks the kernel for a free loopback port.
  public static func freePort() throws -> Int {
    let (fd, port) = try boundLoopbackSocket()
    close(fd)
    return port
  }

  /// A TCP socket bound to 127.0.0.1 on a port the kernel picks, not listening.
  private static func boundLoopbackSocket() throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
        bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
      }
    }
    guard bound else {
      close(fd)
      throw NSError(domain: "OpenSSLServer", code: 2)
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
  }
}

/// Blocking TCP connections to 127.0.0.1 for tests that need raw sockets.
public enum Loopback {
  /// A connected socket, or nil; the caller closes it.
  public static func connect(port: Int, receiveTimeout: Int = 10) -> Int32? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    // On Linux SO_SNDTIMEO also bounds connect(): a full backlog must fail
    // the test, not hang it for the kernel's SYN retries.
    var connectLimit = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &connectLimit, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
      }
    }
    guard connected else {
      close(fd)
      return nil
    }
    var limit = timeval(tv_sec: receiveTimeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    return fd
  }

  public static func send(_ fd: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, 0) }
  }

  /// Everything until the peer closes (or the receive timeout).
  public static func readAll(_ fd: Int32) -> String {
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count <= 0 { break }
      received += buffer[..<count]
    }
    return String(decoding: received, as: UTF8.self)
  }
}
