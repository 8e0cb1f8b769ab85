import Foundation
import PinTestSupport
import XCTest

/// A FIFO where pinproxy expects a file: every file read by name is opened
/// without blocking and refused at once, naming what it is. Each command
/// runs under `timeout`, so a regression shows as a failure, not a hang.
final class FileKindTests: ProxyTestCase {
  var work = ""

  override func setUpWithError() throws {
    work = NSTemporaryDirectory() + "filekind-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
  }

  override func tearDown() {
    super.tearDown()
    try? FileManager.default.removeItem(atPath: work)
  }

  func fifo(_ name: String) throws -> String {
    let path = work + "/" + name
    guard mkfifo(path, 0o600) == 0 else { throw HarnessError("mkfifo \(path): \(errno)") }
    return path
  }

  /// `pinproxy check` of `config` (written to a file), bounded by 20 s.
  func check(_ config: String) throws -> ProcessResult {
    let file = work + "/pinproxy-\(UUID().uuidString.prefix(6)).yaml"
    try config.write(toFile: file, atomically: true, encoding: .utf8)
    return try Subprocess.run("/usr/bin/timeout", ["20", Subprocess.pinproxyPath, "check", "--config", file])
  }

  func base(_ extra: String) -> String {
    """
    stateDirectory: "\(work)/state"
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward\(extra)}
    defaults: {action: deny}
    """
  }

  func testCheckRefusesAFIFOInEveryFileRoleAtOnce() throws {
    let roles: [(String, String)] = [
      (
        "credentialsFile",
        base("") + """

          parentProxies:
            corp: {url: "http://127.0.0.1:3129", credentialsFile: "\(try fifo("credentials"))"}
          domains:
            - {domain: example.com, parentProxy: corp}
          """
      ),
      ("htpasswd", base(", proxyAuth: {htpasswd: \"\(try fifo("htpasswd"))\"}") + "\ndomains: []"),
      (
        "anchors",
        base("") + """

          anchorSets:
            corp: {files: ["\(try fifo("anchors.pem"))"]}
          domains:
            - {domain: example.com, anchors: [corp]}
          """
      ),
    ]
    for (role, config) in roles {
      let result = try check(config)
      XCTAssertEqual(result.status, 2, "\(role): \(result.stdout) \(result.stderr)")
      XCTAssertTrue(result.stderr.contains("it is a FIFO, not a regular file"), "\(role): \(result.stderr)")
    }
    // The local CA's key, read when the daemon starts: it exits 2 naming it.
    let run = work + "/run.yaml"
    try
      (base("") + """

        localCA: {certificate: "\(Fixtures.path("root-a.pem"))", key: "\(try fifo("ca.key"))"}
        domains: []
        """).write(toFile: run, atomically: true, encoding: .utf8)
    let started = try Subprocess.run(
      "/usr/bin/timeout", ["20", Subprocess.pinproxyPath, "run", "--config", run])
    XCTAssertEqual(started.status, 2, started.stderr)
    XCTAssertTrue(started.stderr.contains("it is a FIFO, not a regular file"), started.stderr)
    // The configuration file itself.
    let config = try fifo("config.yaml")
    let result = try Subprocess.run(
      "/usr/bin/timeout", ["20", Subprocess.pinproxyPath, "check", "--config", config])
    XCTAssertEqual(result.status, 2, result.stderr)
    XCTAssertTrue(result.stderr.contains("it is a FIFO, not a regular file"), result.stderr)
  }
}
