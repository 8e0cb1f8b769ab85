import Foundation
import PinTestSupport

#if canImport(Glibc)
  import Glibc
#endif

/// A fenced shell block of README.md and the section it is in.
struct ReadmeBlock {
  let section: String
  /// 1-based line of the opening fence, for messages.
  let line: Int
  let code: String
  /// Set by a `<!-- runnable … -->` comment right before the fence.
  let runnable: Bool
  /// `ports:` of the marker: the fixed ports the block listens on.
  let ports: [Int]
  /// `prints:` of the marker: what its standard output shows, in this order.
  let prints: [String]

  /// Every ```sh block of `text`. The marker is an HTML comment (invisible
  /// when rendered) on the lines right before the fence:
  ///
  ///     <!-- runnable (free text)
  ///     ports: 3128 9443
  ///     prints: HTTP/1.1 200 ok
  ///     -->
  static func parse(_ text: String) throws -> [ReadmeBlock] {
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    var blocks: [ReadmeBlock] = []
    var section = ""
    var marker: [String]?
    var index = 0
    while index < lines.count {
      let line = lines[index]
      if line.hasPrefix("## ") { section = String(line.dropFirst(3)) }
      if line.hasPrefix("<!-- runnable") {
        var comment = [line]
        while !comment.last!.hasSuffix("-->") {
          index += 1
          guard index < lines.count else { throw HarnessError("README line \(index): unterminated marker") }
          comment.append(lines[index])
        }
        guard index + 1 < lines.count, lines[index + 1] == "```sh" else {
          throw HarnessError("README line \(index + 1): a runnable marker must be followed by a ```sh fence")
        }
        marker = comment
      } else if line == "```sh" {
        let start = index + 1
        var code: [String] = []
        index += 1
        while index < lines.count && lines[index] != "```" {
          code.append(lines[index])
          index += 1
        }
        let fields = marker ?? []
        let ports = fields.filter { $0.hasPrefix("ports:") }
          .flatMap { $0.dropFirst("ports:".count).split(separator: " ").compactMap { Int($0) } }
        let prints = fields.filter { $0.hasPrefix("prints: ") }.map { String($0.dropFirst("prints: ".count)) }
        blocks.append(
          ReadmeBlock(
            section: section, line: start, code: code.joined(separator: "\n"), runnable: marker != nil,
            ports: ports, prints: prints))
        marker = nil
      }
      index += 1
    }
    return blocks
  }

  /// The first index of `texts` not found in `output` in this order (each
  /// after the previous one's match), or nil when all are.
  static func missing(_ texts: [String], in output: String) -> Int? {
    var rest = output[...]
    for (position, text) in texts.enumerated() {
      guard let range = rest.range(of: text) else { return position }
      rest = rest[range.upperBound...]
    }
    return nil
  }
}

/// Runs shell code as a reader would paste it: bash with `set -e`, in an
/// empty directory, the test build's `pinproxy` first on PATH. Every process
/// it starts carries a marker in its environment, so what is still running
/// after bash exits is found (and killed) whatever process group it is in.
enum ReadmeRunner {
  struct Outcome {
    /// bash's exit status; nil when it was killed at the timeout.
    let status: Int32?
    let stdout: String
    let stderr: String
    /// `PID command` of every process the block left running (all since killed).
    let leftovers: [String]
  }

  static func run(_ code: String, timeout: Double = 25, settle: Double = 10) throws -> Outcome {
    let id = UUID().uuidString
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-readme-\(id)").path
    // The block starts in `work`, empty; its `mktemp -d` lands in `tmp`; all removed afterwards.
    for directory in ["work", "tmp"] {
      try FileManager.default.createDirectory(
        atPath: scratch + "/" + directory, withIntermediateDirectories: true)
    }
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    let script = scratch + "/block.sh"
    try Data(("set -e\n" + code + "\n").utf8).write(to: URL(fileURLWithPath: script))
    for name in ["stdout", "stderr"] {
      _ = FileManager.default.createFile(atPath: scratch + "/" + name, contents: nil)
    }

    // bash's status is taken from a file the outer bash writes, not from
    // `Process`: Foundation sees its child end only once every process that
    // inherited its notification socket has (a block's server, here).
    let statusFile = scratch + "/status"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", "bash \"$1\"; echo $? > \"$2\"", "bash", script, statusFile]
    process.currentDirectoryURL = URL(fileURLWithPath: scratch + "/work")
    let binaries = URL(fileURLWithPath: Subprocess.pinproxyPath).deletingLastPathComponent().path
    let inherited = ProcessInfo.processInfo.environment
    process.environment = inherited.merging([
      "PATH": binaries + ":" + (inherited["PATH"] ?? "/usr/bin:/bin"), "TMPDIR": scratch + "/tmp",
      marker: id,
    ]) { $1 }
    // Files, not pipes: a background process holding a pipe open would keep a reader waiting.
    let stdout = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch + "/stdout"))
    let stderr = try FileHandle(forWritingTo: URL(fileURLWithPath: scratch + "/stderr"))
    defer {
      try? stdout.close()
      try? stderr.close()
    }
    process.standardOutput = stdout
    process.standardError = stderr
    process.standardInput = FileHandle.nullDevice
    try process.run()

    let deadline = Date().addingTimeInterval(timeout)
    var status: Int32?
    while Date() < deadline {
      if let text = try? String(contentsOfFile: statusFile, encoding: .utf8), text.hasSuffix("\n") {
        status = Int32(text.dropLast())
        break
      }
      usleep(20_000)
    }
    // A block's trap sends SIGTERM and returns; give what it stopped a moment to exit.
    // At the timeout, everything still running is left over, bash included.
    let settled = Date().addingTimeInterval(status == nil ? 0 : settle)
    var left = processes(marked: id, except: process.processIdentifier)
    while !left.isEmpty && Date() < settled {
      usleep(50_000)
      left = processes(marked: id, except: process.processIdentifier)
    }
    for (pid, _) in left { kill(pid, SIGKILL) }
    let exit = Date().addingTimeInterval(10)
    while process.isRunning && Date() < exit { usleep(20_000) }
    let read = { (name: String) in (try? String(contentsOfFile: scratch + "/" + name, encoding: .utf8)) ?? ""
    }
    return Outcome(
      status: status, stdout: read("stdout"), stderr: read("stderr"),
      leftovers: left.map { "\($0.0) \($0.1)" })
  }

  static let marker = "PINPROXY_README_RUN"

  /// Processes whose environment holds the marker set to `id`.
  static func processes(marked id: String, except outer: Int32) -> [(pid: Int32, command: String)] {
    let needle = Data("\(marker)=\(id)\0".utf8)
    let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return names.compactMap { name in
      guard let pid = Int32(name), pid != getpid(), pid != outer,
        let environment = FileManager.default.contents(atPath: "/proc/\(name)/environ"),
        environment.range(of: needle) != nil
      else { return nil }
      let command = FileManager.default.contents(atPath: "/proc/\(name)/cmdline") ?? Data()
      return (pid, String(decoding: command.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self))
    }
  }
}
