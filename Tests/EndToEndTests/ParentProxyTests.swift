import Foundation
import PinTestSupport
import XCTest

/// Behind a corporate proxy: pinproxy reaches its origin only through a
/// real Squid (Basic credentials checked by `basic_ncsa_auth`, the origin's
/// name mapped by Squid's own `hosts_file`), and does its own TLS and trust
/// decision inside the tunnel. One scenario per test: served through the
/// parent, wrong credentials, the parent down, and `check` refusing a
/// credentials file others may read.
final class ParentProxyTests: ProxyTestCase {
  var squid: Process?
  var squidDirectory = ""

  override func tearDown() {
    if let squid, squid.isRunning {
      squid.terminate()
      squid.waitUntilExit()
    }
    if !squidDirectory.isEmpty { try? FileManager.default.removeItem(atPath: squidDirectory) }
    super.tearDown()
  }

  /// Squid on a free port, requiring alice / wonderland, resolving
  /// httpbin.org to 127.0.0.1 from its own hosts file.
  func startSquid() throws -> Int {
    squidDirectory = NSTemporaryDirectory() + "squid-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: squidDirectory, withIntermediateDirectories: true)
    // Squid drops to its own user: it reads its files and writes its logs here.
    chmod(squidDirectory, 0o777)
    let port = try OpenSSLServer.freePort()
    let passwords = squidDirectory + "/passwd"
    let hashed = try Subprocess.run("/usr/bin/htpasswd", ["-nbm", "alice", "wonderland"])
    try hashed.stdout.write(toFile: passwords, atomically: true, encoding: .utf8)
    try "127.0.0.1 httpbin.org\n".write(toFile: squidDirectory + "/hosts", atomically: true, encoding: .utf8)
    chmod(passwords, 0o644)
    chmod(squidDirectory + "/hosts", 0o644)
    let config = """
      http_port 127.0.0.1:\(port)
      pid_filename \(squidDirectory)/squid.pid
      cache_log \(squidDirectory)/cache.log
      access_log \(squidDirectory)/access.log
      cache deny all
      coredump_dir \(squidDirectory)
      shutdown_lifetime 0 seconds
      hosts_file \(squidDirectory)/hosts
      auth_param basic program /usr/lib/squid/basic_ncsa_auth \(passwords)
      acl authenticated proxy_auth REQUIRED
      http_access allow authenticated
      http_access deny all
      """
    try config.write(toFile: squidDirectory + "/squid.conf", atomically: true, encoding: .utf8)
    XCTAssertTrue(FileManager.default.isExecutableFile(atPath: "/usr/sbin/squid"), "squid is not installed")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/sbin/squid")
    process.arguments = ["-N", "-f", squidDirectory + "/squid.conf"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    squid = process
    for _ in 0..<200 {
      if OpenSSLServer.canConnect(port: port) { return port }
      usleep(25_000)
    }
    XCTFail(
      "squid did not start: \((try? String(contentsOfFile: squidDirectory + "/cache.log", encoding: .utf8)) ?? "")"
    )
    return port
  }

  var squidAccessLog: String {
    (try? String(contentsOfFile: squidDirectory + "/access.log", encoding: .utf8)) ?? ""
  }

  /// A credentials file of mode 0600 (or `mode`), holding `line`.
  func credentials(_ line: String, mode: mode_t = 0o600) throws -> String {
    let path = NSTemporaryDirectory() + "parent-" + UUID().uuidString + ".credentials"
    try (line + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    chmod(path, mode)
    addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
  }

  /// The proxy with one rule for httpbin.org through parent `corp`; the
  /// origin listens on `origin.port`, which the request names.
  func startProxy(parentPort: Int, credentialsFile: String, origin: Origin) throws -> Int {
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
        parentProxies:
          corp: {url: "http://127.0.0.1:\(parentPort)", credentialsFile: "\(credentialsFile)"}
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny}
        domains:
          - {domain: httpbin.org, anchors: [test], parentProxy: corp}
        """, listeners: ["forward"])
    proxy = process
    return process.ports["forward"]!
  }

  func testARequestIsServedThroughTheParentWithPinproxysOwnTLS() throws {
    let origin = try origin()
    let parent = try startSquid()
    let port = try startProxy(
      parentPort: parent, credentialsFile: try credentials("alice:wonderland"), origin: origin)
    let result = try get("http://httpbin.org:\(origin.port)/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
    // Squid logs a tunnel when it ends: the pooled one ends with the proxy.
    proxy!.stop()
    for _ in 0..<100 where !squidAccessLog.contains("CONNECT httpbin.org") { usleep(50_000) }
    XCTAssertTrue(
      squidAccessLog.contains("CONNECT httpbin.org:\(origin.port)"),
      "the tunnel went through the parent: \(squidAccessLog)")
    XCTAssertTrue(squidAccessLog.contains(" alice "), "the parent saw the credentials: \(squidAccessLog)")
    XCTAssertFalse(proxy!.log.contains("wonderland"), "the password is never logged")
    XCTAssertFalse(
      origin.requests.joined().lowercased().contains("proxy-authorization"),
      "the parent's credentials never reach the origin")
  }

  func testWrongCredentialsAreTheParentsRefusalWithItsStatusLine() throws {
    let origin = try origin()
    let parent = try startSquid()
    let port = try startProxy(
      parentPort: parent, credentialsFile: try credentials("alice:queenofhearts"), origin: origin)
    let result = try get("http://httpbin.org:\(origin.port)/hello", through: port)
    assertRefused(result, 502, "parent-proxy-refused")
    XCTAssertTrue(result.text.contains("parent proxy corp"), result.text)
    XCTAssertTrue(result.text.contains("407 Proxy Authentication Required"), result.text)
    XCTAssertFalse(proxy!.log.contains("queenofhearts"), "the password is never logged")
    XCTAssertTrue(origin.requests.isEmpty, "nothing reached the origin")
  }

  func testAParentThatIsDownIsUnreachableNotTheOrigin() throws {
    let origin = try origin()
    let closed = try OpenSSLServer.freePort()
    let port = try startProxy(
      parentPort: closed, credentialsFile: try credentials("alice:wonderland"), origin: origin)
    let result = try get("http://httpbin.org:\(origin.port)/hello", through: port)
    assertRefused(result, 502, "parent-proxy-unreachable")
    XCTAssertTrue(result.text.contains("parent proxy corp (http://127.0.0.1:\(closed))"), result.text)
  }

  func testCheckRefusesACredentialsFileOthersMayRead() throws {
    let readable = try credentials("alice:wonderland", mode: 0o644)
    let config = NSTemporaryDirectory() + "parent-" + UUID().uuidString + ".yaml"
    try """
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward}
    parentProxies:
      corp: {url: "http://127.0.0.1:8080", credentialsFile: "\(readable)"}
    defaults: {parentProxy: corp}
    """.write(toFile: config, atomically: true, encoding: .utf8)
    addTeardownBlock { try? FileManager.default.removeItem(atPath: config) }
    let check = try Subprocess.pinproxy(["check", "--config", config])
    XCTAssertNotEqual(check.status, 0, check.stdout + check.stderr)
    XCTAssertTrue(
      (check.stdout + check.stderr).contains("parentProxies.corp.credentialsFile"),
      check.stdout + check.stderr)
    XCTAssertTrue((check.stdout + check.stderr).contains("chmod 600"), check.stdout + check.stderr)
    XCTAssertFalse((check.stdout + check.stderr).contains("wonderland"), "the password is never printed")
  }
}
