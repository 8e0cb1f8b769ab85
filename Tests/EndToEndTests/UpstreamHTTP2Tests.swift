import Foundation
import PinTestSupport
import XCTest

/// HTTP/2 towards the origin: the real binary, HTTP/1.1 clients (curl),
/// nginx with `http2` as the origin, its stub_status counting the TCP
/// connections the proxy opened.
final class UpstreamHTTP2Tests: ProxyTestCase {
  var nginx: NginxOrigin!

  override func tearDown() {
    nginx?.stop()
    super.tearDown()
  }

  func startProxy(rule: String = "", echo: Origin? = nil) throws -> Int {
    nginx = try NginxOrigin(echo: echo)
    return try startProxy(
      map: [:],
      domains: "  - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, "
        + "pinnedCertificates: [\"\(Fixtures.path("int-a.pem"))\"]\(rule)}",
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#, names: ["admin"],
      closedPorts: ["httpbin.org": nginx.port])
  }

  /// `count` GETs at once from as many client connections (curl --parallel).
  func parallelGets(_ url: String, count: Int, through port: Int, extra: [String] = []) throws -> [String] {
    let result = try Subprocess.run(
      "/usr/bin/curl",
      [
        "-s", "--parallel", "--parallel-immediate", "--parallel-max", String(count), "-x",
        "http://127.0.0.1:\(port)",
      ]
        + extra + Array(repeating: url, count: count))
    return result.stdout.split(separator: "\n").map(String.init)
  }

  func metric(_ name: String) throws -> Int {
    let text = try Curl.run(["http://127.0.0.1:\(proxy!.ports["admin"]!)/metrics"]).text
    let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
    return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
  }

  func testFiftyConcurrentHTTP11RequestsShareOneUpstreamConnection() throws {
    let port = try startProxy()
    let bodies = try parallelGets("http://httpbin.org/small", count: 50, through: port)
    XCTAssertEqual(bodies.filter { $0 == "hello over HTTP/2.0" }.count, 50, "\(bodies)")
    XCTAssertEqual(try nginx.acceptedConnections(), 1, "one multiplexed TLS connection for 50 requests")
    let small = nginx.requests(waitingFor: 50) { $0.hasPrefix("HTTP/2.0 GET /small 200") }
    XCTAssertEqual(small.filter { $0.hasPrefix("HTTP/2.0 GET /small 200") }.count, 50)
    XCTAssertEqual(
      try metric(#"pinproxy_upstream_connections_total{protocol="h2"}"#), 1, "the metric counts it too")
    XCTAssertEqual(try metric("pinproxy_http2_streams_in_flight"), 0, "every stream finished")
    // Access lines are written by a background writer: wait for the 50th.
    var access: [String] = []
    for _ in 0..<200 {
      access = proxy!.completeLogLines.filter { $0.contains(" info request ") }
      if access.count >= 50 { break }
      usleep(25_000)
    }
    XCTAssertEqual(access.count, 50)
    XCTAssertTrue(
      access.allSatisfy { $0.contains("upstream_protocol=h2") && $0.contains("client_protocol=http/1.1") },
      access.first ?? "")
  }

  func testNghttpdAnH2OnlyOriginIsServedToHTTP11AndH2Clients() throws {
    // nghttp2's own server speaks only h2: the proxy must pick it in ALPN.
    guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nghttpd") else {
      throw HarnessError("nghttpd is not installed (scripts/install-deps.sh installs nghttp2-server)")
    }
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("nghttpd-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 11) }
    try Data(bytes).write(to: root.appendingPathComponent("file.bin"))
    let originPort = try OpenSSLServer.freePort()
    let server = try BackgroundCommand(
      "/usr/sbin/nghttpd",
      ["-d", root.path, String(originPort), Fixtures.path("httpbin.key"), Fixtures.path("httpbin-chain.pem")])
    defer { server.terminate() }
    var probes = 0
    while !OpenSSLServer.canConnect(port: originPort) && probes < 200 {
      probes += 1
      usleep(25_000)
    }
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      closedPorts: ["httpbin.org": originPort])
    let plain = try get("http://httpbin.org/file.bin", through: port)
    XCTAssertEqual(plain.status, 200)
    XCTAssertTrue(plain.body == Data(bytes), "byte-identical to an HTTP/1.1 client")
    let intercepted = try Curl.run([
      "--http2", "-x", "http://127.0.0.1:\(port)", "--cacert",
      proxy!.directory.appendingPathComponent("state/ca.pem").path, "https://httpbin.org/file.bin",
    ])
    XCTAssertEqual(intercepted.status, 200)
    XCTAssertTrue(intercepted.body == Data(bytes), "byte-identical to an h2 client")
    XCTAssertTrue(proxy!.child.wait(for: "client_protocol=h2"), proxy!.log)
    XCTAssertTrue(proxy!.child.wait(for: "upstream_protocol=h2"), proxy!.log)
  }

  func testUpstreamHTTP2FalseSpeaksHTTP11() throws {
    let port = try startProxy(rule: ", upstreamHTTP2: false")
    let result = try get("http://httpbin.org/small", through: port)
    XCTAssertEqual(result.status, 200)
    XCTAssertEqual(result.text, "hello over HTTP/1.1\n")
    XCTAssertTrue(nginx.requests.contains { $0.hasPrefix("HTTP/1.1 GET /small") }, "\(nginx.requests)")
    XCTAssertTrue(proxy!.child.wait(for: "upstream_protocol=http/1.1"), proxy!.log)
  }

  /// Idle HTTP/1.1 upstream connections: reused while idle, closed by the
  /// pool's sweep once `upstreamIdle` passed (one timer per pool, not one per
  /// connection put back).
  func testAnIdleHTTP11ConnectionIsReusedThenClosedAtItsIdleTimeout() throws {
    nginx = try NginxOrigin()
    let port = try startProxy(
      map: [:],
      domains: "  - {domain: httpbin.org, anchors: [test], upstreamHTTP2: false}",
      extra: "admin: {address: \"127.0.0.1:{port:admin}\"}\ntimeouts: {upstreamIdle: 2}", names: ["admin"],
      closedPorts: ["httpbin.org": nginx.port])
    for _ in 0..<3 { XCTAssertEqual(try get("http://httpbin.org/small", through: port).status, 200) }
    let accepted = try nginx.acceptedConnections()
    XCTAssertEqual(accepted, 1, "three requests on one pooled connection")
    XCTAssertEqual(try metric("pinproxy_upstream_pool_idle_connections"), 1)
    let deadline = Date().addingTimeInterval(6)
    while try metric("pinproxy_upstream_pool_idle_connections") != 0, Date() < deadline { usleep(100_000) }
    XCTAssertEqual(try metric("pinproxy_upstream_pool_idle_connections"), 0, "closed at the idle timeout")
    XCTAssertEqual(try get("http://httpbin.org/small", through: port).status, 200)
    // Each count is itself a connection to the origin (its stub_status).
    XCTAssertEqual(
      try nginx.acceptedConnections(), accepted + 2, "the next request dialled a new connection")
    let proxied = nginx.requests.filter { !$0.contains("/status") }
    XCTAssertEqual(proxied, Array(repeating: "HTTP/1.1 GET /small 200 20", count: 4))
  }

  func testFiftyMegabytesArriveByteIdentical() throws {
    let port = try startProxy()
    let original = try nginx.file("big.bin", size: 50 << 20)
    let result = try get("http://httpbin.org/big.bin", through: port)
    XCTAssertEqual(result.status, 200)
    XCTAssertEqual(result.body.count, 50 << 20)
    XCTAssertTrue(result.body == (try Data(contentsOf: URL(fileURLWithPath: original))), "byte-identical")
    let big = nginx.requests(waitingFor: 1) { $0 == "HTTP/2.0 GET /big.bin 200 \(50 << 20)" }
    XCTAssertTrue(big.contains("HTTP/2.0 GET /big.bin 200 \(50 << 20)"), "\(big)")
  }

  func testAnUploadIsStreamedAsDATAWithItsLength() throws {
    let echo = try origin()
    let port = try startProxy(echo: echo)
    let upload = nginx.directory.appendingPathComponent("upload.bin").path
    let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    try Data(bytes).write(to: URL(fileURLWithPath: upload))
    let digest = try Subprocess.run("/usr/bin/sha256sum", [upload]).stdout.prefix(64)
    // Content-Length, then chunked (no length: the h2 stream just ends).
    for extra in [
      ["--data-binary", "@\(upload)"], ["-H", "Transfer-Encoding: chunked", "--data-binary", "@\(upload)"],
    ] {
      let result = try get("http://httpbin.org/upload", through: port, extra)
      XCTAssertEqual(result.status, 200, "\(extra)")
      XCTAssertEqual(result.text, "\(bytes.count) \(digest)\n", "\(extra)")
    }
    let uploads = nginx.requests(waitingFor: 2) { $0.hasPrefix("HTTP/2.0 POST /upload 200") }
    XCTAssertEqual(uploads.filter { $0.hasPrefix("HTTP/2.0 POST /upload 200") }.count, 2)
  }

  func testASlowClientStallsOnlyItsOwnStream() throws {
    let port = try startProxy()
    try nginx.file("big.bin", size: 40 << 20)
    // A client reading 200 KB/s: its stream's window stays closed...
    let slow = try BackgroundCommand(
      "/usr/bin/curl",
      [
        "-s", "-o", "/dev/null", "--limit-rate", "200k", "--max-time", "30", "-x", "http://127.0.0.1:\(port)",
        "http://httpbin.org/big.bin",
      ])
    Thread.sleep(forTimeInterval: 1)
    // ...while requests on the same upstream connection go on at once.
    let started = Date()
    let bodies = try parallelGets("http://httpbin.org/small", count: 20, through: port)
    XCTAssertEqual(bodies.filter { $0 == "hello over HTTP/2.0" }.count, 20)
    XCTAssertLessThan(Date().timeIntervalSince(started), 5, "fast streams were not held up")
    XCTAssertEqual(try nginx.acceptedConnections(), 1, "they shared the slow stream's connection")
    XCTAssertTrue(slow.isRunning, "the slow download was still going")
    slow.terminate()
  }

  func testGoAwayRetiresTheConnectionAndLaterRequestsOpenANewOne() throws {
    let port = try startProxy()
    XCTAssertEqual(try get("http://httpbin.org/small", through: port).status, 200)
    try nginx.reload()
    // The old worker's GOAWAY reaches the proxy; the pool retires the connection.
    let deadline = Date().addingTimeInterval(10)
    while try metric(#"pinproxy_http2_events_total{side="upstream",event="goaway"}"#) < 1, Date() < deadline {
      usleep(50_000)
    }
    XCTAssertEqual(try metric(#"pinproxy_http2_events_total{side="upstream",event="goaway"}"#), 1)
    let bodies = try parallelGets("http://httpbin.org/small", count: 10, through: port)
    XCTAssertEqual(bodies.filter { $0 == "hello over HTTP/2.0" }.count, 10, "\(bodies)")
    XCTAssertEqual(try nginx.acceptedConnections(), 2, "a new connection after the GOAWAY")
  }

  func testStreamsAboveAGoAwaysLastStreamAreRetriedOnANewConnection() throws {
    // The origin's first connection answers GOAWAY (last stream 0) and closes:
    // the request was never processed there, so it goes again.
    let origin = try H2Origin(goAwayFirst: true)
    defer { origin.stop() }
    let port = origin.port
    let proxyPort = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#, names: ["admin"],
      closedPorts: ["httpbin.org": port])
    let result = try get("http://httpbin.org/retried", through: proxyPort)
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertEqual(result.text, "served on connection 2\n")
    XCTAssertEqual(
      origin.lines, ["connection 1", "request 1 /retried", "connection 2", "request 2 /retried"])
    XCTAssertEqual(try metric(#"pinproxy_http2_events_total{side="upstream",event="goaway"}"#), 1)
    XCTAssertEqual(try metric("pinproxy_http2_streams_in_flight"), 0, "the refused stream gave its slot back")
  }

  func testAnH2ResponseWithoutLengthIsChunkedForHTTP11ClientsWithItsTrailer() throws {
    let origin = try H2Origin()
    defer { origin.stop() }
    let port = origin.port
    let proxyPort = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}", closedPorts: ["httpbin.org": port])
    let response = try RawHTTP.exchange(
      port: proxyPort,
      "GET http://httpbin.org/trailers HTTP/1.1\r\nHost: httpbin.org\r\nTE: trailers\r\nConnection: close\r\n\r\n"
    )
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 200 OK\r\n"), response)
    XCTAssertTrue(response.lowercased().contains("\r\ntransfer-encoding: chunked\r\n"), response)
    XCTAssertTrue(
      response.hasSuffix("\r\n17\r\nserved on connection 1\n\r\n0\r\nx-checksum: abc123\r\n\r\n"), response)
  }

  func testAnOriginThatDiesBeforeAnsweringIsA502() throws {
    let echo = try origin()
    nginx = try NginxOrigin(
      echo: echo,
      extraServer: "location /slow/ { proxy_pass https://127.0.0.1:\(echo.port); proxy_ssl_verify off; }")
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      closedPorts: ["httpbin.org": nginx.port])
    let waiting = try BackgroundCommand(
      "/usr/bin/curl",
      [
        "-s", "-o", "/dev/null", "-w", "%{http_code}", "-D", "-", "--max-time", "20", "-x",
        "http://127.0.0.1:\(port)",
        "http://httpbin.org/slow/5",
      ])
    XCTAssertTrue(echo.waitForRequest("GET /slow/5"), "the request reached the origin")
    nginx.stop()
    let (status, output) = waiting.finish()
    XCTAssertEqual(status, 0)
    XCTAssertTrue(output.hasSuffix("502"), output)
    XCTAssertTrue(output.lowercased().contains("pinproxy-error: upstream-unreachable"), output)
  }

  func testAResetStreamIsA502ForThatExchangeAndTheConnectionGoesOn() throws {
    let origin = try H2Origin()
    defer { origin.stop() }
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#, names: ["admin"],
      closedPorts: ["httpbin.org": origin.port])
    XCTAssertEqual(try get("http://httpbin.org/first", through: port).text, "served on connection 1\n")
    assertRefused(try get("http://httpbin.org/reset", through: port), 502, "upstream-unreachable")
    XCTAssertEqual(
      try get("http://httpbin.org/after", through: port).text, "served on connection 1\n",
      "the same connection serves on")
    XCTAssertEqual(try metric(#"pinproxy_http2_events_total{side="upstream",event="reset_received"}"#), 1)
  }

  func testAnIdleConnectionWhosePingGoesUnansweredIsClosed() throws {
    let origin = try H2Origin(silentAfterFirst: true)
    defer { origin.stop() }
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      extra: "admin: {address: \"127.0.0.1:{port:admin}\"}\ntimeouts: {upstreamIdle: 8}", names: ["admin"],
      closedPorts: ["httpbin.org": origin.port])
    XCTAssertEqual(try get("http://httpbin.org/first", through: port).text, "served on connection 1\n")
    // PING at 2 s, unanswered at 4 s: closed long before the 8 s idle timeout.
    let deadline = Date().addingTimeInterval(6)
    while try metric(#"pinproxy_http2_events_total{side="upstream",event="ping_unanswered"}"#) == 0,
      Date() < deadline
    {
      usleep(100_000)
    }
    XCTAssertEqual(try metric(#"pinproxy_http2_events_total{side="upstream",event="ping_unanswered"}"#), 1)
    // The next request gets a new connection instead of hanging on the dead one.
    XCTAssertEqual(try get("http://httpbin.org/next", through: port).text, "served on connection 2\n")
  }

  func testPastTheOriginsStreamLimitASecondConnectionOpens() throws {
    nginx = try NginxOrigin(extraServer: "http2_max_concurrent_streams 8;")
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      closedPorts: ["httpbin.org": nginx.port])
    // Each response takes about half a second (limit_rate), so they overlap.
    try nginx.file("slow.bin", size: 128 << 10)
    // The first request learns the origin's SETTINGS (8 streams).
    XCTAssertEqual(try get("http://httpbin.org/small", through: port).status, 200)
    _ = try parallelGets("http://httpbin.org/limited/slow.bin", count: 24, through: port)
    let slow = nginx.requests(waitingFor: 24) { $0 == "HTTP/2.0 GET /limited/slow.bin 200 \(128 << 10)" }
    XCTAssertEqual(
      slow.filter { $0 == "HTTP/2.0 GET /limited/slow.bin 200 \(128 << 10)" }.count, 24, "\(slow)")
    let connections = try nginx.acceptedConnections()
    XCTAssertGreaterThanOrEqual(connections, 3, "24 concurrent streams at 8 per connection")
    XCTAssertLessThan(connections, 24, "still multiplexed")
  }

  func testAWrongPinIsRefusedBeforeAnyStream() throws {
    nginx = try NginxOrigin()
    let port = try startProxy(
      map: [:],
      domains: "  - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, "
        + "pinnedPublicKeyHashes: [\"sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]}",
      closedPorts: ["httpbin.org": nginx.port])
    for _ in 0..<3 {
      assertRefused(try get("http://httpbin.org/small", through: port), 502, "pin-mismatch")
    }
    XCTAssertTrue(nginx.requests.isEmpty, "no request reached the origin: \(nginx.requests)")
  }
}
