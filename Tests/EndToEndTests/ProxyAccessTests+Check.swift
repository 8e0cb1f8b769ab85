import Foundation
import PinTestSupport
import XCTest

/// What `pinproxy check` says of a listener open to more than loopback and
/// of htpasswd files it will not use.
extension ProxyAccessTests {
  // MARK: 11. check

  func writeConfig(_ text: String) throws -> String {
    let path = scratchPath("pinproxy.yaml")
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func testCheckRefusesAListenerOnTheWildcardAddressWithoutRules() throws {
    let file = try writeConfig(
      """
      listeners:
        - {name: local, address: "127.0.0.1:3128", mode: forward}
        - name: everywhere
          mode: forward
          address: "0.0.0.0:3129"
      defaults: {action: deny}
      """)
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2, check.stdout + check.stderr)
    XCTAssertTrue(
      check.stderr.contains(
        "\(file):5:14: listeners[1].address: listener everywhere on 0.0.0.0:3129 would be an open proxy: "),
      check.stderr)
    XCTAssertTrue(check.stderr.contains("allowedClients"), check.stderr)
    XCTAssertTrue(check.stderr.contains("proxyAuth"), check.stderr)
  }

  func testCheckWarnsButLoadsAListenerOpenToEveryoneOnPurpose() throws {
    let text = """
      listeners:
        - name: everywhere
          mode: forward
          address: "0.0.0.0:{port:everywhere}"
          allowedClients: ["0.0.0.0/0", "::/0"]
      defaults: {action: deny}
      """
    let file = try writeConfig(text.replacingOccurrences(of: "{port:everywhere}", with: "3129"))
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 0, check.stderr)
    let warnings = check.stderr.split(separator: "\n").filter { $0.contains("warning: ") }
    XCTAssertEqual(warnings.count, 1, check.stderr)
    XCTAssertTrue(warnings.first?.contains("it is an open proxy") ?? false, check.stderr)
    XCTAssertTrue(warnings.first?.hasPrefix("\(file):5:") ?? false, check.stderr)
    XCTAssertTrue(check.stdout.contains("ok"), check.stdout)
    // And `run` says so in its log.
    proxy = try ProxyProcess(config: text, listeners: ["everywhere"])
    XCTAssertTrue(proxy!.child.wait(for: "open-to-everyone"), proxy!.log)
    let line = logLines("open-to-everyone").first ?? ""
    XCTAssertTrue(line.contains("it is an open proxy"), line)
  }

  func testCheckRefusesAnHtpasswdFileWithAnApacheMD5Entry() throws {
    let users = try htpasswd()
    let md5 = try Subprocess.run(Htpasswd.tool, ["-m", "-b", users, "bob", "bobs-Passw0rd"])
    XCTAssertEqual(md5.status, 0, md5.stderr)
    let file = try writeConfig(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward, proxyAuth: {htpasswd: "\(users)"}}
      defaults: {action: deny}
      """)
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2, check.stdout + check.stderr)
    XCTAssertTrue(
      check.stderr.contains("\(users) line 2: user \"bob\": Apache MD5 ($apr1$) hashes are too weak"),
      check.stderr)
    XCTAssertFalse(check.stderr.contains("\"alice\""), "the bcrypt entry is fine: \(check.stderr)")
    XCTAssertFalse(check.stderr.contains("bobs-Passw0rd"))
  }

  func testCheckRefusesAPlainTextHtpasswdEntry() throws {
    let users = scratchPath("plain")
    try "alice:\(Self.password)\n".write(toFile: users, atomically: true, encoding: .utf8)
    let file = try writeConfig(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward, proxyAuth: {htpasswd: "\(users)"}}
      """)
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2, check.stdout + check.stderr)
    XCTAssertTrue(
      check.stderr.contains("\(users) line 1: user \"alice\": a plain-text password"), check.stderr)
    XCTAssertFalse(
      check.stderr.contains(Self.password), "the password itself is never printed: \(check.stderr)")
  }
}

/// Apache's `htpasswd` (apache2-utils). Missing, it is a failure, never a skip.
enum Htpasswd {
  static let tool = "/usr/bin/htpasswd"

  /// Writes `users` to a new file at `path` with bcrypt (`-B`).
  static func write(_ path: String, _ users: [(String, String)]) throws {
    guard FileManager.default.isExecutableFile(atPath: tool) else {
      throw HarnessError("\(tool) is missing: install apache2-utils")
    }
    for (index, (user, password)) in users.enumerated() {
      let result = try Subprocess.run(
        tool, ["-B", "-b"] + (index == 0 ? ["-c"] : []) + [path, user, password])
      guard result.status == 0 else { throw HarnessError("htpasswd failed: \(result.stderr)") }
    }
  }
}
