import Foundation
import PinTestSupport
import XCTest

/// Every relative path in a config resolves against the
/// directory of the config file as `--config` names it, whatever the working
/// directory. `scripts/quickstart.sh` (`--config config/quickstart.yaml`,
/// `stateDirectory: ../.build/quickstart-state`) created its CA in
/// `/.build/quickstart-state`; `--config quickstart.yaml` run from `config/`
/// dropped the `..`.
///
/// The layout, under a fresh temporary root:
///
///     proj/config/app.yaml      stateDirectory: ../state, anchors ../anchors/root.pem and sub/root.pem
///     proj/config/sub/root.pem
///     proj/anchors/root.pem
///     link -> proj/config       a symlinked config directory
///     elsewhere/deep/           a working directory with nothing around it
///
/// Nothing exists where a wrong resolution would look (`proj/config/anchors`,
/// `proj/config/state`, `anchors` and `state` at the root or in the working
/// directory, `/state`), so a wrong path fails `check` or lands a CA that the
/// test finds.
final class ConfigPathTests: XCTestCase {
  var root = ""

  override func setUpWithError() throws {
    root =
      FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-paths-\(UUID().uuidString)")
      .path
    let manager = FileManager.default
    for directory in ["proj/config/sub", "proj/anchors", "elsewhere/deep"] {
      try manager.createDirectory(atPath: root + "/" + directory, withIntermediateDirectories: true)
    }
    try manager.copyItem(atPath: Fixtures.path("root-a.pem"), toPath: root + "/proj/anchors/root.pem")
    try manager.copyItem(atPath: Fixtures.path("root-a.pem"), toPath: root + "/proj/config/sub/root.pem")
    try manager.createSymbolicLink(atPath: root + "/link", withDestinationPath: root + "/proj/config")
    try writeConfig(port: 3999)
  }

  override func tearDown() {
    try? FileManager.default.removeItem(atPath: root)
  }

  func writeConfig(port: Int) throws {
    let text = """
      stateDirectory: ../state
      listeners: [{name: forward, address: "127.0.0.1:\(port)", mode: forward}]
      anchorSets:
        parent: {files: [../anchors/root.pem]}
        child: {files: [sub/root.pem, ./sub/root.pem]}
      defaults: {action: deny}
      domains:
        - domain: a.example
          anchors: [parent, child]
          pinningMode: certificate
          pinnedCertificates: [../anchors/root.pem]
      """
    try Data(text.utf8).write(to: URL(fileURLWithPath: root + "/proj/config/app.yaml"))
  }

  /// (working directory, `--config` as typed) pairs naming the same file.
  var spellings: [(String, String)] {
    let config = root + "/proj/config"
    return [
      (config, "app.yaml"), (config, "./app.yaml"), (config, "../config/app.yaml"),
      (config, config + "/app.yaml"),
      (root + "/proj", "config/app.yaml"), (root + "/proj", "./config/app.yaml"),
      (root + "/proj", "../proj/config/app.yaml"),
      (root + "/elsewhere/deep", "../../proj/config/app.yaml"),
      (root + "/elsewhere/deep", "./../../proj/config/app.yaml"),
      (root + "/elsewhere/deep", config + "/app.yaml"),
      ("/", String(config.dropFirst()) + "/app.yaml"),
      // Through the symlink: `..` leads where the kernel goes, proj/, not the link's parent.
      (root, "link/app.yaml"), ("/", root + "/link/app.yaml"), (root + "/link", "app.yaml"),
    ]
  }

  func testCheckResolvesEveryRelativePathAgainstTheConfigFileFromAnyWorkingDirectory() throws {
    for (directory, config) in spellings {
      let result = try Subprocess.run(Subprocess.pinproxyPath, ["check", "--config", config], in: directory)
      XCTAssertEqual(result.status, 0, "check --config \(config) in \(directory): \(result.stderr)")
      XCTAssertTrue(result.stdout.contains("\(config): ok ("), result.stdout)
    }
  }

  func testRunCreatesTheStateDirectoryBesideTheConfigDirectoryFromAnyWorkingDirectory() throws {
    let expected = root + "/proj/state"
    let wrong = [
      root + "/proj/config/state", root + "/state", root + "/elsewhere/state", root + "/elsewhere/deep/state",
      "/state", root + "/link/state",
    ]
    for (index, (directory, config)) in spellings.enumerated() where index % 3 == 0 || directory == "/" {
      try? FileManager.default.removeItem(atPath: expected)
      try writeConfig(port: try OpenSSLServer.freePort())
      let ready = root + "/ready"
      let proxy = try ChildProcessLauncher.pinproxy(
        after: "cd '\(directory)' || exit 99", ["run", "--config", config, "--ready-file", ready])
      defer { proxy.stop() }
      let name = "run --config \(config) in \(directory)"
      XCTAssertTrue(waitForFile(ready, while: proxy), "\(name): \(proxy.currentOutput)")
      XCTAssertTrue(FileManager.default.fileExists(atPath: expected + "/ca.pem"), name)
      XCTAssertTrue(
        proxy.currentOutput.contains("local-ca certificate=\(expected)/ca.pem created=yes"),
        "\(name): \(proxy.currentOutput)")
      for path in wrong {
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "\(name) created \(path)")
      }
      proxy.signal(SIGTERM)
      proxy.waitForExit()
      XCTAssertEqual(proxy.exitStatus, 0, "\(name): \(proxy.currentOutput)")
    }
  }

  /// True once `path` exists; false if the process exits first or 20 s pass.
  func waitForFile(_ path: String, while process: ChildProcess) -> Bool {
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline {
      if FileManager.default.fileExists(atPath: path) { return true }
      if !process.isRunning { return false }
      usleep(10_000)
    }
    return false
  }
}
