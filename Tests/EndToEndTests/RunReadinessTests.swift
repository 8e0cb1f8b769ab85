import Foundation
import PinTestSupport
import XCTest

/// `run --ready-file` for scripts that must not
/// race the start (the README's blocks wait for it), and `run --help`
/// saying what an operator needs to know.
final class RunReadinessTests: XCTestCase {
  var directory = ""

  override func setUpWithError() throws {
    directory =
      FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-ready-\(UUID().uuidString)")
      .path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  override func tearDown() {
    try? FileManager.default.removeItem(atPath: directory)
  }

  /// A config with a forward and a tunnel listener and the admin endpoint on
  /// the given ports, the CA to be created on first start (the slowest start there is).
  func config(forward: Int, tunnel: Int, admin: Int) throws -> String {
    let file = directory + "/pinproxy.yaml"
    let text = """
      stateDirectory: state
      listeners:
        - {name: forward, address: "127.0.0.1:\(forward)", mode: forward}
        - {name: bank, address: "127.0.0.1:\(tunnel)", mode: tunnel, upstream: "api.bank.example:443"}
      admin: {address: "127.0.0.1:\(admin)"}
      defaults: {action: deny}
      """
    try Data(text.utf8).write(to: URL(fileURLWithPath: file))
    return file
  }

  func testTheReadyFileAppearsOnlyOnceEveryListenerServesAndGoesWhenTheProxyStops() throws {
    let (forward, tunnel, admin) = (
      try OpenSSLServer.freePort(), try OpenSSLServer.freePort(), try OpenSSLServer.freePort()
    )
    let ready = directory + "/ready"
    let proxy = try ChildProcessLauncher.pinproxy([
      "run", "--config", try config(forward: forward, tunnel: tunnel, admin: admin), "--ready-file", ready,
    ])
    defer { proxy.stop() }
    // Polled as a script would; the moment it exists, everything must answer.
    let deadline = Date().addingTimeInterval(20)
    while !FileManager.default.fileExists(atPath: ready) && proxy.isRunning && Date() < deadline {
      usleep(5_000)
    }
    let text = try String(contentsOfFile: ready, encoding: .utf8)
    for port in [forward, tunnel, admin] {
      XCTAssertTrue(OpenSSLServer.canConnect(port: port), "port \(port)")
    }
    let denied = try Curl.run(["-x", "http://127.0.0.1:\(forward)", "http://denied.example/"])
    XCTAssertEqual(denied.status, 403, "the forward listener serves: \(denied.text)")
    let health = try Curl.run(["http://127.0.0.1:\(admin)/healthz"])
    XCTAssertEqual(health.status, 200)
    XCTAssertTrue(
      proxy.currentOutput.contains("created=yes"),
      "a first start, with the CA created: \(proxy.currentOutput)")
    XCTAssertEqual(
      text,
      """
      pid \(proxy.pid)
      listener forward 127.0.0.1:\(forward)
      listener bank 127.0.0.1:\(tunnel)
      admin 127.0.0.1:\(admin)

      """)
    XCTAssertFalse(FileManager.default.fileExists(atPath: ready + ".tmp"), "renamed into place")

    // A reload leaves it alone; a drain removes it before the process exits.
    proxy.signal(SIGHUP)
    XCTAssertTrue(proxy.wait(for: "reload-ok"), proxy.currentOutput)
    XCTAssertTrue(FileManager.default.fileExists(atPath: ready))
    proxy.signal(SIGTERM)
    XCTAssertTrue(proxy.wait(for: "draining"), proxy.currentOutput)
    XCTAssertFalse(FileManager.default.fileExists(atPath: ready), "gone once the listeners are closed")
    proxy.waitForExit()
    XCTAssertEqual(proxy.exitStatus, 0)
  }

  /// A file an earlier run left (it was killed) must not pass for this run's:
  /// it is removed before binding, and a run that cannot bind writes none.
  func testAStaleReadyFileIsRemovedAtStartAndAFailedStartWritesNone() throws {
    let ready = directory + "/ready"
    try Data("pid 1\n".utf8).write(to: URL(fileURLWithPath: ready))
    let taken = try OpenSSLServer(
      certificate: Fixtures.path("httpbin.pem"), key: Fixtures.path("httpbin.key"))
    defer { taken.stop() }
    let file = try config(
      forward: taken.port, tunnel: try OpenSSLServer.freePort(), admin: try OpenSSLServer.freePort())
    let result = try Subprocess.pinproxy(["run", "--config", file, "--ready-file", ready])
    XCTAssertEqual(result.status, 1, result.stderr)
    XCTAssertTrue(result.stderr.contains("listener forward"), result.stderr)
    XCTAssertFalse(FileManager.default.fileExists(atPath: ready))
  }

  func testAReadyFileInADirectoryThatDoesNotExistIsAUsageError() throws {
    let file = try config(
      forward: try OpenSSLServer.freePort(), tunnel: try OpenSSLServer.freePort(),
      admin: try OpenSSLServer.freePort())
    let result = try Subprocess.pinproxy([
      "run", "--config", file, "--ready-file", directory + "/missing/ready",
    ])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(result.stderr.contains("--ready-file \(directory)/missing/ready"), result.stderr)
  }

  /// Item 7: signals, logs, the admin endpoint, relative paths and readiness, in `run --help`.
  func testRunHelpNamesSignalsLogsTheAdminEndpointAndRelativePaths() throws {
    let result = try Subprocess.pinproxy(["run", "--help"])
    XCTAssertEqual(result.status, 0)
    let help = result.stdout.replacingOccurrences(of: "\n", with: " ")
    for text in [
      "SIGHUP reloads", "SIGTERM", "timeouts.drain", "standard error", "logging:", "/healthz", "/metrics",
      "relative to the config file's directory", "--ready-file",
    ] {
      XCTAssertTrue(help.contains(text), "\(text) in: \(result.stdout)")
    }
  }
}
