import Foundation
import PinTestSupport
import XCTest

/// Hostile HTTP/2 peers and the budgets, each case against the real binary: header
/// limits on HTTP/2 enforced as blocks are decoded (both directions), the
/// upstream socket and buffer budgets, timers on every h2 stream, prompt
/// endings after a broken origin response. Hostile peers are
/// Tests/Fixtures/h2_hostile_client.py and h2_hostile_origin.py.
final class HostileHTTP2Tests: ProxyTestCase {
  var h2Origin: H2Origin?
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }

  override func tearDown() {
    h2Origin?.stop()
    super.tearDown()
  }

  /// httpbin.org on the Python HTTP/1.1 origin, interception on.
  func startWithHTTP1Origin(
    extra: String = "", listeners: String = "", names: [String] = [], wrapper: [String] = []
  ) throws -> (Int, Origin) {
    let origin = try origin()
    let port = try startProxy(
      map: ["httpbin.org": origin], domains: "  - {domain: httpbin.org, anchors: [test]}", extra: extra,
      listeners: listeners, names: names, wrapper: wrapper)
    return (port, origin)
  }

  /// Runs the hostile client and decodes its JSON line.
  func attack(_ port: Int, _ arguments: [String], path: String = "/hello") throws -> [String: Any] {
    let result = try Subprocess.run(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/h2_hostile_client.py", "--proxy", String(port), "--ca", caPath,
        "--host", "httpbin.org", "--path", path, "--timeout", "20",
      ] + arguments)
    guard result.status == 0,
      let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
    else { throw HarnessError("h2_hostile_client.py failed: \(result.stdout) \(result.stderr)") }
    return object
  }

  // MARK: Header limits, client side

  func testTooManyOrTooLargeHeaderFieldsResetTheStreamAndNeverReachTheOrigin() throws {
    let (port, origin) = try startWithHTTP1Origin()
    let many = try attack(port, ["--attack", "many-fields", "--count", "150"], path: "/headers?many")
    XCTAssertNil(many["status"] as? Int, "\(many)")
    XCTAssertNotNil(many["reset"] as? Int, "\(many)")
    let big = try attack(
      port, ["--attack", "big-fields", "--count", "50", "--size", "4000"], path: "/headers?big")
    XCTAssertNil(big["status"] as? Int, "\(big)")
    XCTAssertNotNil(big["reset"] as? Int, "\(big)")
    XCTAssertFalse(origin.requests.joined(separator: "\n").contains("/headers?"), "\(origin.requests)")
    XCTAssertTrue(proxy!.child.wait(for: "over 100 fields or 65536 bytes"), proxy!.log)
    // Within the limits the same request is served.
    let fine = try attack(port, ["--attack", "many-fields", "--count", "20"])
    XCTAssertEqual(fine["status"] as? Int, 200, "\(fine)")
  }

  /// A 4000-byte table entry referenced thousands of times per block: each
  /// stream is reset at the limit and the daemon's memory stays flat.
  func testHPACKBombIsResetWithAndWithoutContinuationAndMemoryStaysBounded() throws {
    let (port, origin) = try startWithHTTP1Origin()
    _ = try attack(port, ["--attack", "many-fields", "--count", "5"])  // warm up
    let before = proxy!.child.residentKiB
    let plain = try attack(port, ["--attack", "hpack-bomb", "--streams", "4", "--refs", "13000"])
    let continued = try attack(
      port, ["--attack", "hpack-bomb", "--streams", "20", "--refs", "13000", "--continuation"])
    let after = proxy!.child.residentKiB
    for result in [plain, continued] {
      let streams = result["streams"] as? [String: [String: Any]] ?? [:]
      XCTAssertFalse(streams.isEmpty, "\(result)")
      for (id, stream) in streams { XCTAssertNil(stream["status"] as? Int, "stream \(id): \(result)") }
    }
    print("HPACK bomb: RSS before \(before) KiB, after \(after) KiB")
    XCTAssertLessThan(after - before, 20 * 1024, "RSS grew from \(before) KiB to \(after) KiB")
    XCTAssertFalse(origin.requests.joined().contains("x-bomb"))
  }

  // MARK: Header limits, origin side; prompt endings

  func testOversizedResponseHeadersFromAnH2OriginAre502AtOnce() throws {
    h2Origin = try H2Origin(script: "h2_hostile_origin.py")
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      closedPorts: ["httpbin.org": h2Origin!.port])
    for path in ["/many-fields", "/big-fields", "/hpack-bomb"] {
      let start = Date()
      let result = try get("http://httpbin.org\(path)", through: port)
      XCTAssertEqual(result.status, 502, "\(path): \(result.text)")
      XCTAssertEqual(result.pinproxyError, "upstream-unreachable", path)
      XCTAssertLessThan(
        Date().timeIntervalSince(start), 1.5, "\(path) took \(Date().timeIntervalSince(start)) s")
    }
    XCTAssertEqual(try get("http://httpbin.org/ok", through: port).status, 200)
  }

  /// An origin whose DATA contradicts its content-length: the HTTP/1.1
  /// client holding the 200 head is cut off at once, not after a timeout.
  func testLengthMismatchFromAnH2OriginEndsTheClientResponseAtOnce() throws {
    h2Origin = try H2Origin(script: "h2_hostile_origin.py")
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      closedPorts: ["httpbin.org": h2Origin!.port])
    let start = Date()
    let result = try Subprocess.run(
      "/usr/bin/curl",
      ["-s", "--max-time", "20", "-x", "http://127.0.0.1:\(port)", "http://httpbin.org/length-mismatch"])
    let elapsed = Date().timeIntervalSince(start)
    XCTAssertNotEqual(result.status, 0, "a cut-short body must not look complete")
    XCTAssertLessThan(elapsed, 2, "took \(elapsed) s")
  }

  /// At the connection limit an h2 connection whose streams all still wait
  /// for their request body is as expendable as a slow HTTP/1.1 head.
  func testAnH2ConnectionOfUnfinishedRequestsIsEvictedAtTheConnectionLimit() throws {
    let (port, origin) = try startWithHTTP1Origin(extra: "limits: {maxConnections: 3}")
    let stalled = try BackgroundCommand(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/h2_hostile_client.py", "--proxy", String(port), "--ca", caPath,
        "--host", "httpbin.org", "--path", "/echo", "--attack", "incomplete-body", "--streams", "3", "--hold",
        "10",
      ])
    XCTAssertTrue(proxy!.child.wait(for: "minted", timeout: 10), proxy!.log)
    usleep(300_000)
    // Two exchanges in flight: they may not be evicted.
    let busy = try (0..<2).map { _ in
      try BackgroundCommand(
        "/usr/bin/curl",
        ["-s", "-x", "http://127.0.0.1:\(port)", "-o", "/dev/null", "http://httpbin.org/slow/3"])
    }
    XCTAssertTrue(origin.waitForRequest("GET /slow/3", count: 2))
    let result = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertTrue(proxy!.child.wait(for: "evicted"), proxy!.log)
    let (_, output) = stalled.finish()
    XCTAssertTrue(output.contains("\"closed\": true") || output.contains("\"goaway\": 0"), output)
    busy.forEach { _ = $0.finish() }
  }

  // MARK: Budgets

  /// Many slow streams from one client: its upstream sockets stop at its
  /// share (the rest wait or get 503 over-capacity), the process keeps
  /// descriptors, and another client is served in time.
  func testSlowStreamFloodStaysWithinTheSocketBudgetAndOthersAreServed() throws {
    let (port, _) = try startWithHTTP1Origin(
      listeners: #"  - {name: v6, address: "[::1]:{port:v6}", mode: forward}"#, names: ["v6"],
      wrapper: ["/usr/bin/prlimit", "--nofile=256:256", "--"])
    let flood = try BackgroundCommand(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/h2_hostile_client.py", "--proxy", String(port), "--ca", caPath,
        "--host", "httpbin.org", "--path", "/slow/3", "--timeout", "30", "--attack", "slow-streams",
        "--streams", "100", "--connections", "6", "--hold", "4",
      ])
    XCTAssertTrue(proxy!.child.wait(for: "over-capacity", timeout: 15), proxy!.log)
    let start = Date()
    let other = try Curl.run(["-x", "http://[::1]:\(proxy!.ports["v6"]!)", "http://httpbin.org/hello"])
    XCTAssertEqual(other.status, 200, other.text + other.stderr)
    XCTAssertLessThan(Date().timeIntervalSince(start), 5)
    let (_, output) = flood.finish()
    let result = (try? JSONSerialization.jsonObject(with: Data(output.utf8))) as? [String: Any] ?? [:]
    let statuses = result["status_counts"] as? [String: Int] ?? [:]
    XCTAssertGreaterThan(statuses["503"] ?? 0, 0, "\(result)")
    XCTAssertGreaterThan(statuses["200"] ?? 0, 0, "\(result)")
    XCTAssertFalse(proxy!.log.contains("accept-paused"), proxy!.log)
  }

  /// One h2 connection asking for 60 slow exchanges at once: at most 32
  /// hold an upstream socket, the rest wait their turn, and every one is served.
  func testAnH2ConnectionHoldsAtMost32UpstreamsAndTheRestWaitTheirTurn() throws {
    let (port, _) = try startWithHTTP1Origin(
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#, names: ["admin"])
    let flood = try BackgroundCommand(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/h2_hostile_client.py", "--proxy", String(port), "--ca", caPath,
        "--host", "httpbin.org", "--path", "/slow/2", "--timeout", "30", "--attack", "slow-streams",
        "--streams", "60", "--connections", "1", "--hold", "0",
      ])
    var highest = 0
    for _ in 0..<20 {
      usleep(150_000)
      let text = try Curl.run(["http://127.0.0.1:\(proxy!.ports["admin"]!)/metrics"]).text
      let line = text.split(separator: "\n").first { $0.hasPrefix("pinproxy_upstream_sockets_open ") }
      highest = max(highest, line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0)
    }
    let (_, output) = flood.finish()
    let result = (try? JSONSerialization.jsonObject(with: Data(output.utf8))) as? [String: Any] ?? [:]
    XCTAssertEqual((result["status_counts"] as? [String: Int])?["200"], 60, output)
    XCTAssertGreaterThan(highest, 0)
    XCTAssertLessThanOrEqual(highest, 32, "upstream sockets open at once")
  }

  /// Clients that never open their window: what the proxy buffers for them
  /// is bounded per stream, per connection and in all.
  func testZeroWindowReadersPinBoundedMemory() throws {
    let (port, _) = try startWithHTTP1Origin()
    _ = try attack(port, ["--attack", "many-fields", "--count", "5"])
    let before = proxy!.child.residentKiB
    for _ in 0..<3 {
      _ = try attack(
        port, ["--attack", "zero-window", "--streams", "100", "--hold", "3"], path: "/bytes/3000000")
    }
    let after = proxy!.child.residentKiB
    print("zero-window readers: RSS before \(before) KiB, after \(after) KiB")
    // Unbounded, 100 streams × 256 KiB each was ~25 MB per connection.
    XCTAssertLessThan(after - before, 16 * 1024, "RSS grew from \(before) KiB to \(after) KiB")
  }

  // MARK: Timers

  func testH2StreamsWhoseBodyNeverCompletesAreAnsweredWithinTheTimeout() throws {
    let (port, origin) = try startWithHTTP1Origin(extra: "timeouts: {upstreamResponse: 2}")
    let result = try attack(
      port, ["--attack", "incomplete-body", "--streams", "5", "--hold", "8"], path: "/echo")
    let streams = result["streams"] as? [String: [String: Any]] ?? [:]
    XCTAssertEqual(streams.count, 5, "\(result)")
    for (id, stream) in streams {
      XCTAssertEqual(stream["status"] as? Int, 408, "stream \(id): \(result)")
      XCTAssertLessThan(stream["status_at"] as? Double ?? 99, 4, "stream \(id): \(result)")
    }
    XCTAssertFalse(origin.requests.joined(separator: "\n").contains("/echo"), "\(origin.requests)")
  }
}
