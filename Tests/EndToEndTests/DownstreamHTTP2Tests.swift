import Foundation
import PinTestSupport
import XCTest

/// HTTP/2 towards clients inside an intercepted CONNECT: the real binary,
/// curl `--http2` and a raw h2 client (Python's `h2`, Tests/Fixtures/h2_client.py)
/// for shapes no well-behaved client sends; nginx (h2) or the Python origin
/// (HTTP/1.1 only) behind.
final class DownstreamHTTP2Tests: ProxyTestCase {
  var nginx: NginxOrigin!
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }

  override func tearDown() {
    nginx?.stop()
    super.tearDown()
  }

  func startProxy(pin: String? = nil, listener: String? = nil, echo: Origin? = nil) throws -> Int {
    nginx = try NginxOrigin(echo: echo)
    let pins =
      pin.map { "pinnedPublicKeyHashes: [\"\($0)\"]" }
      ?? "pinnedCertificates: [\"\(Fixtures.path("int-a.pem"))\"]"
    return try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, \(pins)}",
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#,
      listeners: listener.map { "\n" + $0 } ?? "", names: ["admin"], closedPorts: ["httpbin.org": nginx.port])
  }

  /// curl through the proxy's interception; the last stdout line is `-w`'s.
  func curl(_ port: Int, _ arguments: [String]) throws -> ProcessResult {
    try Subprocess.run(
      "/usr/bin/curl",
      ["-s", "--max-time", "30", "-x", "http://127.0.0.1:\(port)", "--cacert", caPath] + arguments)
  }

  struct H2Result: Decodable {
    struct Stream: Decodable {
      let status: Int?
      let error: String?
      let body: Int?
      let ended: Bool?
      let reset: Int?
      let trailers: [String: String]?
    }
    let streams: [String: Stream]
    let goaway: Int?
    let order: [String]?
    let sent: Int?
    let closed: Bool?
  }

  /// Runs the raw h2 client: `requests` as header lists (or objects with a body).
  func h2Client(_ port: Int, _ arguments: [String]) throws -> H2Result {
    let result = try Subprocess.run(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/h2_client.py", "--proxy", String(port), "--ca", caPath, "--host",
        "httpbin.org",
      ]
        + arguments)
    guard result.status == 0 else { throw HarnessError("h2_client.py failed: \(result.stderr)") }
    return try JSONDecoder().decode(H2Result.self, from: Data(result.stdout.utf8))
  }

  func requestFile(_ requests: [Any]) throws -> String {
    let path = proxy!.directory.appendingPathComponent("requests-\(UUID().uuidString).json").path
    try JSONSerialization.data(withJSONObject: requests).write(to: URL(fileURLWithPath: path))
    return path
  }

  static func get(_ path: String, _ extra: [[String]] = []) -> [[String]] {
    [[":method", "GET"], [":scheme", "https"], [":authority", "httpbin.org"], [":path", path]] + extra
  }

  func testCurlSpeaksH2ThroughInterceptionAndTheOriginGetsH2() throws {
    let port = try startProxy()
    let result = try curl(port, ["--http2", "-w", "\n%{http_version}", "https://httpbin.org/small"])
    XCTAssertEqual(result.stdout, "hello over HTTP/2.0\n\n2", result.stderr)
    XCTAssertTrue(nginx.requests.contains { $0.hasPrefix("HTTP/2.0 GET /small 200") })
    XCTAssertTrue(proxy!.child.wait(for: "client_protocol=h2"), proxy!.log)
    let line = proxy!.completeLogLines.first { $0.contains(" info request ") } ?? ""
    XCTAssertTrue(line.contains("client_protocol=h2") && line.contains("upstream_protocol=h2"), line)
    // Via names the protocol each hop received (RFC 9110 §7.6.3).
    let headers = try curl(port, ["--http2", "-D", "-", "-o", "/dev/null", "https://httpbin.org/small"])
    XCTAssertTrue(headers.stdout.contains("via: 2 pinproxy\r\n"), headers.stdout)
  }

  func testJavaHttpClientNegotiatesH2AndGetsBodyAndRefusalPerStream() throws {
    // Its default version is HTTP_2: it offers h2 inside the CONNECT.
    let port = try startProxy()
    let output = try Java.run(
      """
      import java.net.*; import java.net.http.*; import java.security.*; import java.security.cert.*;
      import javax.net.ssl.*; import java.io.*;
      public class H2 {
        \(Java.trustingMethod)
        public static void main(String[] args) throws Exception {
          SSLContext tls = trusting(args[1]);
          HttpClient client = HttpClient.newBuilder().sslContext(tls)
              .proxy(ProxySelector.of(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])))).build();
          for (String path : new String[] {"/small", "/missing", "/small"}) {
            HttpResponse<String> response = client.send(
                HttpRequest.newBuilder(URI.create("https://httpbin.org" + path)).build(),
                HttpResponse.BodyHandlers.ofString());
            System.out.println(path + " " + response.version() + " " + response.statusCode() + " "
                + response.body().length());
          }
        }
      }
      """, arguments: [String(port), caPath])
    XCTAssertEqual(output, "/small HTTP_2 200 20\n/missing HTTP_2 404 153\n/small HTTP_2 200 20\n")
    XCTAssertEqual(nginx.requests.filter { $0.hasPrefix("HTTP/2.0 GET /small 200") }.count, 2)
  }

  func testTrailersFromAnH2OriginReachAnH2Client() throws {
    let origin = try H2Origin()
    defer { origin.stop() }
    let originPort = origin.port
    let port = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}",
      closedPorts: ["httpbin.org": originPort])
    let result = try h2Client(port, ["--requests", try requestFile([Self.get("/trailers")])])
    let stream = try XCTUnwrap(result.streams[try XCTUnwrap(result.order?.first)])
    XCTAssertEqual(stream.status, 200)
    XCTAssertEqual(stream.body, "served on connection 1\n".utf8.count)
    XCTAssertEqual(stream.trailers, ["x-checksum": "abc123"])
  }

  func testManyStreamsOfOneClientShareOneUpstreamConnection() throws {
    let port = try startProxy()
    let result = try curl(
      port,
      ["--http2", "--parallel", "--parallel-max", "20"]
        + Array(repeating: "https://httpbin.org/small", count: 20))
    XCTAssertEqual(
      result.stdout.components(separatedBy: "hello over HTTP/2.0\n").count - 1, 20, result.stderr)
    XCTAssertEqual(try nginx.acceptedConnections(), 1)
  }

  func testFiftyMegabytesOverH2BothSidesArriveByteIdentical() throws {
    let port = try startProxy()
    let original = try nginx.file("big.bin", size: 50 << 20)
    let copy = nginx.directory.appendingPathComponent("copy.bin").path
    let result = try curl(
      port, ["--http2", "-o", copy, "-w", "%{http_code} %{http_version}", "https://httpbin.org/big.bin"])
    XCTAssertEqual(result.stdout, "200 2")
    XCTAssertTrue(
      try Data(contentsOf: URL(fileURLWithPath: copy)) == Data(contentsOf: URL(fileURLWithPath: original)),
      "byte-identical")
  }

  func testAnH2ClientsRequestReachesAnHTTP11OriginAsHTTP11() throws {
    // Host from :authority, one joined Cookie (RFC 9113 §8.2.3), Via naming
    // the protocol the proxy received, no pseudo-header.
    let echo = try origin()
    _ = try startProxy(
      map: [:], domains: "  - {domain: httpbin.org, anchors: [test]}", closedPorts: ["httpbin.org": echo.port]
    )
    let result = try Subprocess.run(
      "/usr/bin/curl",
      [
        "-s", "--http2", "-x", "http://127.0.0.1:\(proxy!.ports["forward"]!)", "--cacert", caPath,
        "-H", "Cookie: a=1", "-H", "Cookie: b=2", "https://httpbin.org/headers",
      ])
    let lines = result.stdout.split(separator: "\n").map(String.init)
    XCTAssertTrue(lines.contains("Host: httpbin.org"), result.stdout)
    XCTAssertTrue(lines.contains("Via: 2 pinproxy"), result.stdout)
    XCTAssertEqual(lines.filter { $0.lowercased().hasPrefix("cookie:") }, ["cookie: a=1; b=2"], result.stdout)
    XCTAssertFalse(result.stdout.contains(":authority") || result.stdout.contains(":path"), result.stdout)
  }

  func testAnH2ClientUploadReachesAnHTTP11OriginWhole() throws {
    let echo = try origin()
    let port = try startProxy(echo: echo)
    let upload = nginx.directory.appendingPathComponent("upload.bin").path
    let bytes = (0..<(2 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 13) }
    try Data(bytes).write(to: URL(fileURLWithPath: upload))
    let digest = try Subprocess.run("/usr/bin/sha256sum", [upload]).stdout.prefix(64)
    let result = try curl(port, ["--http2", "--data-binary", "@\(upload)", "https://httpbin.org/upload"])
    XCTAssertEqual(result.stdout, "\(bytes.count) \(digest)\n")
  }

  func testDownstreamHTTP2FalseKeepsClientsOnHTTP11() throws {
    let listener =
      #"  - {name: plain, address: "127.0.0.1:{port:plain}", mode: forward, downstream: {http2: false}}"#
    nginx = try NginxOrigin()
    _ = try startProxy(
      map: [:],
      domains: "  - {domain: httpbin.org, anchors: [test], pinningMode: publicKey, "
        + "pinnedCertificates: [\"\(Fixtures.path("int-a.pem"))\"]}",
      listeners: listener, names: ["plain"], closedPorts: ["httpbin.org": nginx.port])
    let result = try curl(
      proxy!.ports["plain"]!, ["--http2", "-w", "\n%{http_version}", "https://httpbin.org/small"])
    XCTAssertEqual(
      result.stdout, "hello over HTTP/2.0\n\n1.1", "the client stayed on HTTP/1.1; upstream is h2")
  }

  func testMalformedStreamsAreRefusedAloneAndNeverReachTheOrigin() throws {
    let port = try startProxy()
    let shapes: [Any] = [
      Self.get("/small"),
      Self.get("/bad-upper", [["X-Upper", "1"]]),
      Self.get("/bad-crlf", [["x-a", "1\r\nx-b: 2"]]),
      Self.get("/bad-nul", [["x-a", "1\u{0}2"]]),
      Self.get("/bad-connection", [["connection", "keep-alive"]]),
      Self.get("/bad-transfer-encoding", [["transfer-encoding", "chunked"]]),
      Self.get("/bad-te", [["te", "gzip"]]),
      [
        [":method", "GET"], [":scheme", "https"], ["accept", "*/*"], [":authority", "httpbin.org"],
        [":path", "/bad-order"],
      ],
      Self.get("/bad-repeat", [[":path", "/bad-repeat-2"]]),
      [[":method", "GET"], [":scheme", "https"], [":authority", "httpbin.org"], [":path", ""]],
      [
        [":method", "GET"], [":scheme", "https"], [":authority", "httpbin.org"],
        [":path", "bad-not-origin-form"],
      ],
      [
        "headers": Self.get("/bad-length", [["content-length", "10"]]).map {
          $0[0] == ":method" ? [":method", "POST"] : $0
        },
        "body": "short",
      ],
      [[":method", "CONNECT"], [":authority", "example.com:443"]],
      Self.get("/small"),
    ]
    let result = try h2Client(port, ["--requests", try requestFile(shapes)])
    let order = try XCTUnwrap(result.order)
    XCTAssertEqual(order.count, shapes.count)
    let streams = order.map { result.streams[$0] }
    for index in [0, order.count - 1] {
      XCTAssertEqual(streams[index]?.status, 200, "good stream \(index) served beside the bad ones")
    }
    for index in 1..<(order.count - 2) {
      let stream = streams[index]
      XCTAssertTrue(
        stream?.reset == 1 || stream?.status == 400, "shape \(index) refused: \(String(describing: stream))")
    }
    XCTAssertEqual(streams[order.count - 2]?.status, 501, "CONNECT inside h2")
    XCTAssertEqual(streams[order.count - 2]?.error, "bad-request")
    XCTAssertNil(result.goaway, "the connection survived")
    let seen = nginx.requests
    XCTAssertEqual(seen.filter { $0.contains("/small") }.count, 2)
    XCTAssertFalse(seen.contains { $0.contains("/bad") || $0.contains("CONNECT") }, "\(seen)")
  }

  func testAWrongPinIsA502OnEachStreamAndTheConnectionGoesOn() throws {
    let port = try startProxy(pin: "sha256/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
    let result = try h2Client(
      port, ["--requests", try requestFile([Self.get("/a"), Self.get("/b"), Self.get("/c")])])
    for id in try XCTUnwrap(result.order) {
      XCTAssertEqual(result.streams[id]?.status, 502)
      XCTAssertEqual(result.streams[id]?.error, "pin-mismatch")
      XCTAssertEqual(result.streams[id]?.ended, true)
    }
    XCTAssertNil(result.goaway)
    XCTAssertTrue(nginx.requests.isEmpty)
  }

  func metric(_ name: String) throws -> Int {
    let text = try Curl.run(["http://127.0.0.1:\(proxy!.ports["admin"]!)/metrics"]).text
    let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
    return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
  }

  func testAHeaderBlockSpreadOverManyContinuationFramesEndsTheConnection() throws {
    // CVE-2024-28182: a 150 KB field makes ~9 CONTINUATION frames after the
    // HEADERS frame; the bound is 8, and the header list limit is 64 KiB.
    let port = try startProxy()
    let result = try h2Client(
      port,
      [
        "--requests",
        try requestFile([Self.get("/huge", [["x-huge", String(repeating: "a", count: 150_000)]])]),
      ])
    let stream = result.streams.values.first
    XCTAssertTrue(
      result.goaway != nil || stream?.reset != nil || stream?.status == 431,
      "refused: \(String(describing: stream)), goaway \(String(describing: result.goaway))")
    XCTAssertFalse(nginx.requests.contains { $0.contains("/huge") })
    let after = try curl(port, ["--http2", "https://httpbin.org/small"])
    XCTAssertEqual(after.stdout, "hello over HTTP/2.0\n")
  }

  func testARapidResetFloodIsCutOffAndTheProxyServesOthers() throws {
    let port = try startProxy()
    let result = try h2Client(port, ["--flood", "3000"])
    XCTAssertTrue(result.goaway != nil || result.closed == true, "the flooding connection ended")
    XCTAssertGreaterThan(
      try metric(#"pinproxy_http2_events_total{side="downstream",event="reset_received"}"#), 0)
    XCTAssertGreaterThanOrEqual(
      try metric(#"pinproxy_http2_events_total{side="downstream",event="rapid_reset"}"#)
        + metric(#"pinproxy_http2_events_total{side="downstream",event="session_ended"}"#), 1,
      "ended by the proxy's bucket of cancelled exchanges or by nghttp2's RST_STREAM limit, and counted")
    let reached = nginx.requests.filter { $0.contains("/small") }.count
    XCTAssertLessThan(reached, 400, "the flood was cut off: \(reached) of 3000 reached the origin")
    let after = try curl(port, ["--http2", "https://httpbin.org/small"])
    XCTAssertEqual(after.stdout, "hello over HTTP/2.0\n", "another client is served")
    // Every stream of the flood, served, reset or cut off, was accounted for.
    var inFlight = -1
    for _ in 0..<100 {
      inFlight = try metric("pinproxy_http2_streams_in_flight")
      if inFlight == 0 { break }
      usleep(50_000)
    }
    XCTAssertEqual(inFlight, 0)
  }
}
