import Foundation

/// A running child process, terminated when the test is done.
public final class ChildProcess: @unchecked Sendable {
  let process = Process()
  let output = Pipe()
  public private(set) var log = ""
  private let lock = NSLock()

  /// The process's resident set size in KiB (`VmRSS` of /proc/PID/status).
  public var residentKiB: Int { statusKiB("VmRSS:") }

  /// The most the process has held resident so far, in KiB (`VmHWM`).
  public var peakResidentKiB: Int { statusKiB("VmHWM:") }

  private func statusKiB(_ field: String) -> Int {
    let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix(field) } ?? ""
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
  }

  init(
    _ executable: String, _ arguments: [String], captureStandardError: Bool,
    environment: [String: String] = [:]
  ) throws {
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if !environment.isEmpty {
      process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    if captureStandardError {
      process.standardError = output
      process.standardOutput = FileHandle.nullDevice
    } else {
      process.standardOutput = output
      process.standardError = FileHandle.nullDevice
    }
    try process.run()
    output.fileHandleForReading.readabilityHandler = { [weak self] handle in
      let data = handle.availableData
      guard let self, !data.isEmpty else { return }
      self.lock.withLock { self.log += String(decoding: data, as: UTF8.self) }
    }
  }

  public var currentOutput: String { lock.withLock { log } }

  /// After the process exited: everything it wrote, including what the
  /// readability handler had not delivered yet.
  func drainedOutput() -> String {
    output.fileHandleForReading.readabilityHandler = nil
    let rest = output.fileHandleForReading.readDataToEndOfFile()
    lock.withLock { log += String(decoding: rest, as: UTF8.self) }
    return currentOutput
  }

  /// Waits until the output contains `text`.
  public func wait(for text: String, timeout: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if currentOutput.contains(text) { return true }
      if !process.isRunning { return drainedOutput().contains(text) }
      usleep(10_000)
    }
    return false
  }

  /// Waits for the "listening … listener=NAME" line, text or JSON.
  public func waitForListener(_ name: String, timeout: Double = 10) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      let text = currentOutput
      if text.contains("listener=\(name)\n") || text.contains("listener=\(name) ")
        || text.contains("\"listener\":\"\(name)\"")
      {
        return true
      }
      if !process.isRunning { return false }
      usleep(10_000)
    }
    return false
  }

  /// SIGTERM, then SIGKILL if the process is still running after
  /// `stopDeadline` seconds (a daemon draining a connection a test left
  /// open would otherwise hold the run for its whole drain). A stop that
  /// takes over 2 s is reported on standard error, naming the command, so a
  /// slow teardown shows in the run's log.
  public func stop() {
    output.fileHandleForReading.readabilityHandler = nil
    guard process.isRunning else { return }
    let started = Date()
    process.terminate()
    let deadline = started.addingTimeInterval(Self.stopDeadline)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    process.waitUntilExit()
    let seconds = Date().timeIntervalSince(started)
    if seconds > 2 {
      let name = ([process.executableURL?.lastPathComponent ?? "?"] + (process.arguments ?? []).prefix(3))
        .joined(separator: " ")
      let line = Data("teardown: \(name) took \(String(format: "%.1f", seconds)) s to stop\n".utf8)
      FileHandle.standardError.write(line)
      // A parallel run shows only failed tests' output: the test command
      // names a file where every report is kept as well.
      if let path = ProcessInfo.processInfo.environment["PINPROXY_TEARDOWN_LOG"],
        let file = FileHandle(forWritingAtPath: path)
      {
        file.seekToEndOfFile()
        file.write(line)
        try? file.close()
      }
    }
  }

  /// How long a stopped child may take before it is killed.
  public static let stopDeadline = 5.0

  public func signal(_ number: Int32) { kill(process.processIdentifier, number) }
  public var pid: Int32 { process.processIdentifier }
  public func waitForExit() { process.waitUntilExit() }
  public var exitStatus: Int32 { process.terminationStatus }
  public var isRunning: Bool { process.isRunning }

  /// Resident memory of the child, from /proc (kB).
  public var residentKilobytes: Int {
    let status =
      (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
  }

  deinit { stop() }
}

/// The Python origin of Tests/Fixtures/origin.py on 127.0.0.1.
public final class Origin {
  public let port: Int
  public let requestLog: String
  let child: ChildProcess

  /// - Parameter name: PKI fixture base name: `NAME-chain.pem` and `NAME.key`.
  public convenience init(_ name: String = "httpbin", arguments: [String] = []) throws {
    try self.init(
      certificate: Fixtures.path("\(name)-chain.pem"), key: Fixtures.path("\(name).key"), arguments: arguments
    )
  }

  public init(certificate: String, key: String, arguments: [String] = []) throws {
    requestLog =
      FileManager.default.temporaryDirectory.appendingPathComponent("origin-\(UUID().uuidString).log").path
    FileManager.default.createFile(atPath: requestLog, contents: Data())
    child = try ChildProcess(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/origin.py", "--cert", certificate, "--key", key, "--log",
        requestLog,
      ] + arguments, captureStandardError: false)
    guard child.wait(for: "READY "),
      let line = child.currentOutput.split(separator: "\n").first(where: { $0.hasPrefix("READY") }),
      let port = Int(line.split(separator: " ")[1])
    else { throw HarnessError("origin did not start: \(child.currentOutput)") }
    self.port = port
  }

  /// Waits until the origin has received `count` requests with this request
  /// line (it logs each as it starts): synchronisation without a guessed sleep.
  @discardableResult
  public func waitForRequest(_ line: String, count: Int = 1, timeout: Double = 15) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if requests.filter({ $0 == line }).count >= count { return true }
      usleep(20_000)
    }
    return false
  }

  /// Request lines the origin received.
  public var requests: [String] {
    (try? String(contentsOfFile: requestLog, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
  }

  /// TLS connections the origin accepted so far (asked directly, not through the proxy).
  public func statsHandshakes() throws -> Int {
    let result = try Curl.run([
      "--cacert", Fixtures.path("root-a.pem"), "--resolve", "httpbin.org:\(port):127.0.0.1",
      "https://httpbin.org:\(port)/stats",
    ])
    let field = result.text.split(separator: " ").first { $0.hasPrefix("handshakes=") } ?? "handshakes=-1"
    // This request's own connection is counted too.
    return (Int(field.dropFirst("handshakes=".count)) ?? 0) - 1
  }

  public func stop() { child.stop() }
}

/// The real `pinproxy run` with a generated configuration.
public final class ProxyProcess {
  public let directory: URL
  public let child: ChildProcess
  public let ports: [String: Int]

  /// `config` may use `{port:NAME}` placeholders; each gets a free loopback port.
  public let configFile: String

  /// - Parameter wrapper: a command that runs the binary (such as `prlimit --nofile=256 --`), or none.
  public init(
    config: String, listeners: [String], verbose: Bool = true, environment: [String: String] = [:],
    wrapper: [String] = []
  ) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "pinproxy-e2e-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let file = directory.appendingPathComponent("pinproxy.yaml").path
    configFile = file
    // A port found free can be taken before the daemon binds it (by a
    // client's ephemeral port of a test running beside this one): then the
    // daemon is started again on other ports, at most three times.
    var attempt = 0
    while true {
      attempt += 1
      var text = config
      var ports: [String: Int] = [:]
      for name in listeners {
        let port = try OpenSSLServer.freePort()
        ports[name] = port
        text = text.replacingOccurrences(of: "{port:\(name)}", with: String(port))
      }
      try Data(Self.withTestDefaults(text, directory: directory).utf8).write(to: URL(fileURLWithPath: file))
      let command =
        wrapper + [Subprocess.pinproxyPath, "run", "--config", file] + (verbose ? ["--verbose"] : [])
      let child = try ChildProcess(
        command[0], Array(command.dropFirst()), captureStandardError: true, environment: environment)
      if let missing = listeners.first(where: { !child.waitForListener($0) }) {
        child.stop()
        if attempt < 3 && child.currentOutput.contains("Address already in use") { continue }
        throw HarnessError("pinproxy did not start listener \(missing): \(child.currentOutput)")
      }
      self.ports = ports
      self.child = child
      return
    }
  }

  public var log: String { child.currentOutput }

  /// The log's complete lines: a line still being written is left out.
  public var completeLogLines: [String] {
    let text = child.currentOutput
    guard let end = text.lastIndex(of: "\n") else { return [] }
    return text[..<end].split(separator: "\n").map(String.init)
  }

  /// Waits until a complete log line satisfies `matches` (the daemon writes
  /// its lines from a background thread, after the client already has its
  /// answer); false after `timeout` seconds. Assert on log lines through
  /// this, never on `completeLogLines` read at once.
  public func waitForLine(timeout: Double = 10, _ matches: (String) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    repeat {
      if completeLogLines.contains(where: matches) { return true }
      usleep(20_000)
    } while Date() < deadline
    return completeLogLines.contains(where: matches)
  }

  /// Replaces the configuration file (same `{port:NAME}` placeholders) for a reload.
  public func rewrite(config: String) throws {
    var text = config
    for (name, port) in ports { text = text.replacingOccurrences(of: "{port:\(name)}", with: String(port)) }
    try Data(Self.withTestDefaults(text, directory: directory).utf8).write(
      to: URL(fileURLWithPath: configFile))
  }

  /// A state directory of the test's own and, unless the test sets its
  /// `timeouts` (a test about draining does), a 2 s drain: stopping a
  /// daemon that still holds a connection then takes 2 s, not 30.
  static func withTestDefaults(_ config: String, directory: URL) -> String {
    var text = config
    if !text.contains("stateDirectory:") { text = "stateDirectory: \"\(directory.path)/state\"\n" + text }
    let setsTimeouts = text.split(separator: "\n").contains {
      $0.trimmingCharacters(in: .whitespaces).hasPrefix("timeouts:")
    }
    // Last, so that the line numbers of the test's own text stay as written.
    if !setsTimeouts { text += (text.hasSuffix("\n") ? "" : "\n") + "timeouts: {drain: 2s}\n" }
    return text
  }

  public func stop() {
    child.stop()
    try? FileManager.default.removeItem(at: directory)
  }
}

public struct HarnessError: Error, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}

/// One curl run: status, response headers and body.
public struct CurlResult {
  public let status: Int
  public let headers: [String: String]
  public let body: Data
  public let stderr: String

  public var text: String { String(decoding: body, as: UTF8.self) }
  public var pinproxyError: String? { headers["pinproxy-error"] }
}

public enum Curl {
  public static func run(_ arguments: [String]) throws -> CurlResult {
    let directory = FileManager.default.temporaryDirectory
    let headerFile = directory.appendingPathComponent("curl-h-\(UUID().uuidString)").path
    let bodyFile = directory.appendingPathComponent("curl-b-\(UUID().uuidString)").path
    defer {
      try? FileManager.default.removeItem(atPath: headerFile)
      try? FileManager.default.removeItem(atPath: bodyFile)
    }
    let result = try Subprocess.run(
      "/usr/bin/curl",
      ["-s", "-S", "--max-time", "30", "-D", headerFile, "-o", bodyFile, "-w", "%{http_code}"] + arguments)
    var headers: [String: String] = [:]
    let headerText = (try? String(contentsOfFile: headerFile, encoding: .utf8)) ?? ""
    // The last header block is the final response (interim 1xx blocks come first).
    let blocks = headerText.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
    for line in (blocks.last ?? "").split(separator: "\r\n").dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
        in: .whitespaces)
    }
    return CurlResult(
      status: Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0, headers: headers,
      body: FileManager.default.contents(atPath: bodyFile) ?? Data(), stderr: result.stderr)
  }
}

/// Raw bytes to a TCP port and everything read back until the peer closes:
/// for requests no well-behaved client would send.
public enum RawHTTP {
  public static func exchange(port: Int, _ request: String, timeout: Double = 10) throws -> String {
    guard let fd = Loopback.connect(port: port, receiveTimeout: Int(timeout)) else {
      throw HarnessError("cannot connect to port \(port)")
    }
    defer { close(fd) }
    Loopback.send(fd, request)
    return Loopback.readAll(fd)
  }
}

public enum ChildProcessLauncher {
  /// `pinproxy` with `arguments`, its standard error captured.
  public static func pinproxy(_ arguments: [String], environment: [String: String] = [:]) throws
    -> ChildProcess
  {
    try ChildProcess(Subprocess.pinproxyPath, arguments, captureStandardError: true, environment: environment)
  }

  /// A Python fixture script, its standard output captured.
  public static func python(_ script: String, _ arguments: [String]) throws -> ChildProcess {
    try ChildProcess("/usr/bin/env", ["python3", script] + arguments, captureStandardError: false)
  }

  /// `pinproxy` started by `/bin/sh` after `prelude` (e.g. `ulimit -n 64`).
  public static func pinproxy(after prelude: String, _ arguments: [String]) throws -> ChildProcess {
    let quoted = ([Subprocess.pinproxyPath] + arguments).map { "'\($0)'" }.joined(separator: " ")
    return try ChildProcess("/bin/sh", ["-c", "\(prelude); exec \(quoted)"], captureStandardError: true)
  }
}

/// A command running in the background whose outcome the test collects later.
public final class BackgroundCommand {
  let process = Process()
  let output = Pipe()

  public init(_ executable: String, _ arguments: [String]) throws {
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
  }

  public var isRunning: Bool { process.isRunning }

  /// Ends the command now (SIGTERM) and waits for it.
  public func terminate() {
    if process.isRunning { process.terminate() }
    process.waitUntilExit()
  }

  /// Waits for the command and returns its exit status and standard output.
  public func finish() -> (Int32, String) {
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
  }
}

/// A unix datagram socket playing systemd's NOTIFY_SOCKET.
public final class NotifySocket {
  public let path: String
  let fd: Int32

  public init() throws {
    path =
      FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8))")
      .path
    fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
    let bound = withUnsafePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
      }
    }
    guard bound == 0 else { throw HarnessError("cannot bind \(path)") }
    var limit = timeval(tv_sec: 0, tv_usec: 200_000)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
  }

  deinit {
    close(fd)
    unlink(path)
  }

  /// Datagrams received until `done` holds or `timeout` passes.
  public func messages(timeout: Double = 10, until done: ([String]) -> Bool) -> [String] {
    var received: [String] = []
    let deadline = Date().addingTimeInterval(timeout)
    var buffer = [UInt8](repeating: 0, count: 4096)
    while Date() < deadline && !done(received) {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count > 0 { received.append(String(decoding: buffer[..<count], as: UTF8.self)) }
    }
    return received
  }
}
