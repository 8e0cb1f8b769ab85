import Foundation
import PinTestSupport
import XCTest

/// README.md's commands, run as written: a README change that
/// breaks one fails here.
///
/// Each ```sh block marked `<!-- runnable … -->` (see `ReadmeBlock.parse`)
/// runs in bash with `set -e` in a fresh empty directory, not the checkout;
/// `/path/to/pinproxy` in it stands for the checkout. `pinproxy` on PATH is
/// the debug binary `swift build --build-tests` produced (the one every
/// end-to-end test runs, `Subprocess.pinproxyPath`), not the release binary
/// the README's reader would have: `scripts/test.sh` builds debug only. The
/// block must exit 0, print each `prints:` line of its marker in order, stop
/// every process it started (its own `trap … EXIT`) and free its `ports:`.
/// The blocks listen on fixed ports (3128 and 9443 of config/quickstart.yaml;
/// 3129, the parent proxy's; 13128, 18443 and 19443) that no other test binds while this one runs:
/// tests run one at a time and every other test takes a free port, except
/// RunCommandTests' embedded default (3128), which stops its daemon before
/// it returns.
///
/// The systemd block needs root and systemd, so it is not marked; its
/// `install` lines into /etc/pinproxy run against a temporary directory
/// instead, and the unit's `ExecStartPre` check must pass on the result.
final class ReadmeTests: XCTestCase {
  static let readme = Fixtures.repositoryRoot + "/README.md"

  func blocks() throws -> [ReadmeBlock] {
    try ReadmeBlock.parse(String(contentsOfFile: ReadmeTests.readme, encoding: .utf8))
  }

  func testEveryRunnableBlockRunsInAnEmptyDirectoryAndPrintsWhatItSays() throws {
    let runnable = try blocks().filter(\.runnable)
    // Dropping a marker must not quietly drop a block from the test.
    XCTAssertEqual(
      Set(runnable.map(\.section)),
      [
        "Quick start (offline)", "A server rotated its key", "Dynamic pinning", "Serving other machines",
        "Behind a corporate proxy", "Warning before a renewal locks users out",
        "Clients that only speak SOCKS",
      ])
    for block in runnable {
      let name = "README line \(block.line) (\(block.section))"
      // `scripts/test.sh` runs this test: a block that ran it would recurse.
      XCTAssertFalse(block.code.contains("scripts/test.sh") || block.code.contains("scripts/setup.sh"), name)
      XCTAssertFalse(block.prints.isEmpty, "\(name): its marker names nothing it prints")
      let busy = block.ports.filter { OpenSSLServer.canConnect(port: $0) }
      guard busy.isEmpty else {
        XCTFail("\(name): ports \(busy) are already in use by another process; the block needs them")
        continue
      }
      let started = Date()
      let outcome = try ReadmeRunner.run(
        block.code.replacingOccurrences(of: "/path/to/pinproxy", with: Fixtures.repositoryRoot))
      let seconds = Date().timeIntervalSince(started)
      let report =
        "\(name), \(String(format: "%.1f", seconds)) s\n--- stdout\n\(outcome.stdout)\n--- stderr\n\(outcome.stderr)"
      XCTAssertEqual(outcome.status, 0, "exit status (nil: still running at the timeout): \(report)")
      if let index = ReadmeBlock.missing(block.prints, in: outcome.stdout) {
        XCTFail(
          "\(name) did not print \"\(block.prints[index])\" (prints: lines are matched in order): \(report)")
      }
      XCTAssertEqual(outcome.leftovers, [], "\(name) left processes running (killed now): \(report)")
      // A process that is exiting no longer shows its environment (so the
      // runner no longer counts it) a moment before the kernel closes its
      // sockets: its ports are given that moment, bounded.
      let closing = Date().addingTimeInterval(5)
      while !block.ports.filter({ OpenSSLServer.canConnect(port: $0) }).isEmpty && Date() < closing {
        usleep(50_000)
      }
      XCTAssertEqual(
        block.ports.filter { OpenSSLServer.canConnect(port: $0) }, [], "\(name): still listening")
    }
  }

  /// A reader opens the ports a block needs before running it: the prose
  /// right above each runnable block names every port its marker lists
  /// (the quick start once named 3128 and 9443 but also needed 9901).
  func testTheProseAboveEachRunnableBlockNamesEveryPortItUses() throws {
    let lines = try String(contentsOfFile: ReadmeTests.readme, encoding: .utf8)
      .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    for block in try blocks().filter(\.runnable) {
      // `line` is the first code line (1-based index of the fence + 1): walk
      // up past the fence and the marker to the paragraph before them.
      var index = block.line - 2
      while index > 0 && !lines[index].hasPrefix("<!-- runnable") { index -= 1 }
      var paragraph: [String] = []
      index -= 1
      while index >= 0 && lines[index].isEmpty { index -= 1 }
      while index >= 0 && !lines[index].isEmpty {
        paragraph.insert(lines[index], at: 0)
        index -= 1
      }
      let prose = paragraph.joined(separator: " ")
      for port in block.ports {
        XCTAssertTrue(
          prose.contains(String(port)),
          "README line \(block.line): the prose does not name port \(port): \(prose)")
      }
    }
  }

  /// Once, the block installed config/pinproxy.yaml alone, and the unit's
  /// `ExecStartPre=pinproxy check` failed on the example files it names.
  func testTheSystemdBlockInstallsEverythingItsConfigNamesAndTheUnitsCheckPasses() throws {
    let block = try XCTUnwrap(try blocks().first { $0.section == "Installing under systemd" })
    XCTAssertFalse(block.runnable, "it needs root and systemd")
    let root = FileManager.default.temporaryDirectory.appendingPathComponent(
      "pinproxy-etc-\(UUID().uuidString)"
    )
    .path
    defer { try? FileManager.default.removeItem(atPath: root) }
    // Every command of the block that installs into /etc/pinproxy, as typed, minus sudo.
    var commands: [String] = []
    for line in block.code.split(separator: "\n").map(String.init) {
      let command = line.range(of: " #").map { String(line[..<$0.lowerBound]) } ?? line
      for part in command.components(separatedBy: "&&") {
        let typed = part.trimmingCharacters(in: .whitespaces)
        guard typed.hasPrefix("sudo install "), typed.contains("/etc/pinproxy") else { continue }
        commands.append(
          String(typed.dropFirst("sudo ".count)).replacingOccurrences(
            of: "/etc/pinproxy", with: root + "/etc/pinproxy"))
      }
    }
    XCTAssertTrue(commands.contains { $0.contains("config/pinproxy.yaml") }, "\(commands)")
    // The block runs in the checkout (it builds there).
    let install = try Subprocess.run(
      "/bin/bash", ["-e", "-c", commands.joined(separator: "\n")], in: Fixtures.repositoryRoot)
    XCTAssertEqual(install.status, 0, install.stderr)

    // The unit's own check command line, paths moved under the stand-in.
    let unit = try String(
      contentsOfFile: Fixtures.repositoryRoot + "/systemd/pinproxy.service", encoding: .utf8)
    let line = try XCTUnwrap(unit.split(separator: "\n").first { $0.hasPrefix("ExecStartPre=") })
    let words = line.dropFirst("ExecStartPre=".count).split(separator: " ").map {
      $0.replacingOccurrences(of: "/etc/pinproxy", with: root + "/etc/pinproxy")
    }
    XCTAssertEqual(words.first, "/usr/local/bin/pinproxy")
    // systemd starts it in /, the proxy's working directory too.
    let check = try Subprocess.run(Subprocess.pinproxyPath, Array(words.dropFirst()), in: "/")
    XCTAssertEqual(check.status, 0, "stdout: \(check.stdout)\nstderr: \(check.stderr)")
    XCTAssertTrue(check.stdout.contains(": ok ("), check.stdout)
  }

  func testTheParserReadsMarkersAndTheRunnerCatchesFailuresAndLeftovers() throws {
    let text = """
      ## A
      ```sh
      echo not marked
      ```
      <!-- runnable
      ports: 1 2
      prints: one
      prints: two
      -->
      ```sh
      echo one two
      ```
      """
    let parsed = try ReadmeBlock.parse(text)
    XCTAssertEqual(parsed.map(\.runnable), [false, true])
    XCTAssertEqual(parsed[1].ports, [1, 2])
    XCTAssertEqual(parsed[1].prints, ["one", "two"])
    XCTAssertNil(ReadmeBlock.missing(["one", "two"], in: "one two"))
    XCTAssertEqual(ReadmeBlock.missing(["two", "one"], in: "one two"), 1, "in order")
    XCTAssertThrowsError(
      try ReadmeBlock.parse("<!-- runnable -->\n```\nls\n```\n"), "a marker before no sh fence")

    let failing = try ReadmeRunner.run("false\necho not reached")
    XCTAssertEqual(failing.status, 1, "set -e")
    XCTAssertFalse(failing.stdout.contains("not reached"))
    let leaving = try ReadmeRunner.run("sleep 300 &\necho started", settle: 0.5)
    XCTAssertEqual(leaving.status, 0)
    XCTAssertEqual(leaving.leftovers.count, 1, "the background sleep")
    XCTAssertTrue(leaving.leftovers.first?.contains("sleep 300") ?? false, "\(leaving.leftovers)")
    let hanging = try ReadmeRunner.run("sleep 300", timeout: 1)
    XCTAssertNil(hanging.status)
    let cwd = try ReadmeRunner.run("pwd; ls -A; command -v pinproxy")
    let lines = cwd.stdout.split(separator: "\n").map(String.init)
    XCTAssertEqual(lines.count, 2, "an empty directory: \(cwd.stdout)")
    XCTAssertFalse(lines.first?.hasPrefix(Fixtures.repositoryRoot) ?? true, "not the checkout")
    XCTAssertEqual(lines.last, Subprocess.pinproxyPath, "the test build's binary first on PATH")
  }
}
