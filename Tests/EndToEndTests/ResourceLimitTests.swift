import Foundation
import PinTestSupport
import XCTest

/// What a local attacker could exhaust: descriptors, the admin listener,
/// memory through pipelining, and a configuration value that crashed the
/// daemon. Each scenario runs the real binary.
final class ResourceLimitTests: ProxyTestCase {
  func testAnOversizedTimeoutIsAConfigErrorNotACrash() throws {
    let file = try TemporaryFile(
      "timeouts:\n  clientHeader: 1e12s\n  idleKeepAlive: 18446744073s\n  drain: 8d\n")
    defer { file.remove() }
    let result = try Subprocess.run(Subprocess.pinproxyPath, ["check", "--config", file.path])
    XCTAssertEqual(result.status, 2, result.stdout + result.stderr)
    let output = result.stdout + result.stderr
    for key in ["timeouts.clientHeader", "timeouts.idleKeepAlive", "timeouts.drain"] {
      XCTAssertTrue(output.contains(key), "\(key) not named: \(output)")
    }
  }

  func testAReloadWithAnOversizedTimeoutKeepsServing() throws {
    let origin = try origin()
    let port = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}")
    let config = try String(contentsOfFile: proxy!.configFile, encoding: .utf8)
    try Data((config + "\ntimeouts: {idleKeepAlive: 18446744073s}\n").utf8).write(
      to: URL(fileURLWithPath: proxy!.configFile))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-failed"), proxy!.log)
    for _ in 0..<3 { XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200) }
    XCTAssertTrue(proxy!.child.isRunning)
  }

  /// Idle admin connections beyond the cap are closed at once, the rest after
  /// the header timeout; neither the data path nor /healthz starves.
  func testIdleAdminConnectionsAreCappedAndTimedOut() throws {
    let origin = try origin()
    let config = httpbinConfig(
      origin, top: #"admin: {address: "127.0.0.1:{port:admin}"}"# + "\ntimeouts: {clientHeader: 1s}")
    proxy = try ProxyProcess(config: config, listeners: ["forward", "admin"])
    let adminPort = proxy!.ports["admin"]!
    var idle: [Int32] = []
    defer { idle.forEach { close($0) } }
    for _ in 0..<40 { if let fd = Loopback.connect(port: adminPort, receiveTimeout: 5) { idle.append(fd) } }
    func closedByProxy() -> Int {
      idle.filter { fd in
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
      }.count
    }
    // Silent connections are held outside the 16 slots, at most 32 (the
    // oldest pushed out by a newer one, closed straight away: EOF); the
    // header timeout is 1 s, so at 0.8 s only those may be closed.
    usleep(800_000)
    let early = closedByProxy()
    XCTAssertGreaterThanOrEqual(early, 40 - 32)
    XCTAssertEqual(try get("http://httpbin.org/hello", through: proxy!.ports["forward"]!).status, 200)
    // The idle ones within the cap go after the header timeout.
    let deadline = Date().addingTimeInterval(15)
    while closedByProxy() < 40 && Date() < deadline { usleep(100_000) }
    XCTAssertEqual(closedByProxy(), 40, "every idle admin connection is closed")
    XCTAssertEqual(try Curl.run(["http://127.0.0.1:\(adminPort)/healthz"]).status, 200)
  }

  /// Out of descriptors, the listener rests instead of spinning on EMFILE,
  /// and serves again once descriptors are free.
  func testRunningOutOfDescriptorsDoesNotSpin() throws {
    let origin = try origin()
    // One loop, so 64 descriptors are enough whatever the core count.
    let config = httpbinConfig(origin, top: "eventLoops: 1")
    let port = try OpenSSLServer.freePort()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "emfile-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let file = directory.appendingPathComponent("pinproxy.yaml").path
    try Data(
      ("stateDirectory: \"\(directory.path)/state\"\n"
        + config.replacingOccurrences(of: "{port:forward}", with: String(port))).utf8
    ).write(to: URL(fileURLWithPath: file))
    let child = try ChildProcessLauncher.pinproxy(after: "ulimit -n 64", ["run", "--config", file])
    defer { child.stop() }
    XCTAssertTrue(child.waitForListener("forward"), child.currentOutput)
    var held: [Int32] = []
    defer { held.forEach { close($0) } }
    for _ in 0..<100 { if let fd = Loopback.connect(port: port, receiveTimeout: 2) { held.append(fd) } }
    XCTAssertTrue(child.wait(for: "accept-paused", timeout: 5), child.currentOutput)
    let busy = try cpuSeconds(of: child, over: 2)
    XCTAssertLessThan(busy, 0.5, "the daemon used \(busy) s of CPU in 2 s while out of descriptors")
    held.forEach { close($0) }
    held = []
    // The backlog of connections already queued drains first (each at EOF).
    var result = try Curl.run(["-x", "http://127.0.0.1:\(port)", "http://httpbin.org/hello"])
    for _ in 0..<40 where result.status != 200 {
      usleep(500_000)
      result = try Curl.run(["-x", "http://127.0.0.1:\(port)", "http://httpbin.org/hello"])
    }
    XCTAssertEqual(result.status, 200, result.text + result.stderr + child.currentOutput.suffix(2000))
  }

  /// Tiny pipelined requests cost one buffered read per connection, not a
  /// parsed queue of every request in it.
  func testPipeliningDoesNotAmplifyMemory() throws {
    let origin = try origin()
    let port = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "logging: {access: false}")
    let request =
      "GET http://httpbin.org/slow/5 HTTP/1.1\r\nHost: httpbin.org\r\n\r\n"
      + String(repeating: "GET http://httpbin.org/hello HTTP/1.1\r\nHost: a\r\n\r\n", count: 1300)
    let before = proxy!.child.residentKilobytes
    var held: [Int32] = []
    defer { held.forEach { close($0) } }
    for _ in 0..<200 {
      guard let fd = Loopback.connect(port: port) else { continue }
      var size: Int32 = 256 * 1024
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
      let bytes = Array(request.utf8)
      _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
      held.append(fd)
    }
    sleep(2)
    let grown = proxy!.child.residentKilobytes - before
    // 200 × 64 KiB sent; parsed ahead, each tiny request cost ~9× its size.
    XCTAssertLessThan(grown, 60_000, "RSS grew by \(grown) kB for 200 pipelining connections")
  }

  /// CPU seconds (user + system) the process used over `seconds`.
  func cpuSeconds(of child: ChildProcess, over seconds: Double) throws -> Double {
    func ticks() throws -> Double {
      let stat = try String(contentsOfFile: "/proc/\(child.pid)/stat", encoding: .utf8)
      let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
      return (Double(fields[11])! + Double(fields[12])!) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
    let start = try ticks()
    usleep(UInt32(seconds * 1_000_000))
    return try ticks() - start
  }
}
