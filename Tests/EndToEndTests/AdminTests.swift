import Foundation
import PinTestSupport
import XCTest

/// The admin endpoint: health, Prometheus metrics read by Prometheus' own
/// parser, policies as JSON, and nothing else.
final class AdminTests: ProxyTestCase {
  var adminPort: Int { proxy!.ports["admin"]! }

  func startWithAdmin(extra: String = "") throws {
    let origin = try origin()
    let config = """
      admin: {address: "127.0.0.1:{port:admin}"}
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)", "pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      \(extra)
      domains:
        - {domain: httpbin.org, anchors: [test]}
        - domain: pinned.httpbin.org
          anchors: [test]
          pinningMode: publicKey
          pinnedCertificates: ["\(Fixtures.path("adn.pem"))"]
          pinnedPublicKeyHashes: ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="]
          clientIdentity: {pkcs12: "\(Fixtures.path("client.p12"))", passphraseFile: "\(Fixtures.path("client.pass"))"}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward", "admin"])
  }

  func admin(_ path: String) throws -> CurlResult { try Curl.run(["http://127.0.0.1:\(adminPort)\(path)"]) }

  func through(_ url: String) throws -> CurlResult {
    try Curl.run(["-x", "http://127.0.0.1:\(proxy!.ports["forward"]!)", url])
  }

  /// Samples parsed by prometheus_client: "name{labels} value" lines.
  func parsedMetrics() throws -> [String] { try PrometheusScrape.samples(adminPort: adminPort) }

  func value(_ samples: [String], _ prefix: String) -> Double? {
    samples.first { $0.hasPrefix(prefix + " ") }.flatMap { Double($0.split(separator: " ").last!) }
  }

  func testHealthz() throws {
    try startWithAdmin()
    let health = try admin("/healthz")
    XCTAssertEqual(health.status, 200)
    XCTAssertEqual(health.text, "ok\n")
  }

  func testMetricsParseAndMoveAsRequestsPass() throws {
    try startWithAdmin()
    let before = try parsedMetrics()
    XCTAssertNotNil(value(before, "process_start_time_seconds{}"), before.joined(separator: "\n"))
    XCTAssertEqual(value(before, "pinproxy_config_generation{}"), 1)
    XCTAssertEqual(try through("http://httpbin.org/hello").status, 200)
    XCTAssertEqual(try through("http://httpbin.org/hello").status, 200)
    XCTAssertEqual(try through("http://pinned.httpbin.org/hello").status, 502)
    let after = try parsedMetrics()
    let joined = after.joined(separator: "\n")
    XCTAssertEqual(value(after, "pinproxy_requests_total{class=2xx,listener=forward}"), 2, joined)
    XCTAssertEqual(value(after, "pinproxy_requests_total{class=5xx,listener=forward}"), 1, joined)
    XCTAssertEqual(
      value(after, "pinproxy_refusals_total{code=pin-mismatch,rule=pinned.httpbin.org}"), 1, joined)
    // The second request reused the pooled connection; the refused one never completes a handshake.
    XCTAssertEqual(value(after, "pinproxy_upstream_handshakes_total{kind=full}"), 1, joined)
    XCTAssertGreaterThanOrEqual(value(after, "pinproxy_fingerprint_cache_misses_total{}") ?? 0, 2, joined)
    XCTAssertGreaterThanOrEqual(value(after, "pinproxy_fingerprint_cache_entries{}") ?? 0, 1, joined)
    XCTAssertNotNil(value(after, "pinproxy_upstream_pool_idle_connections{}"), joined)
    XCTAssertNotNil(value(after, "pinproxy_client_connections_open{}"), joined)
  }

  func testPoliciesListRulesAndPinsWithoutSecrets() throws {
    try startWithAdmin()
    let result = try admin("/policies")
    XCTAssertEqual(result.status, 200)
    let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: result.body) as? [String: Any])
    let domains = try XCTUnwrap(json["domains"] as? [[String: Any]])
    XCTAssertEqual(domains.map { $0["domain"] as? String }, ["httpbin.org", "pinned.httpbin.org"])
    let pins = try XCTUnwrap(domains[1]["expectedPublicKeyPins"] as? [String])
    XCTAssertEqual(
      pins, [Fixtures.certificate("adn.pem").spkiPin, "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="])
    XCTAssertFalse(result.text.contains("client.pass"), "no passphrase file in /policies")
    XCTAssertFalse(result.text.contains("correct horse"), "no passphrase in /policies")
  }

  func testAnythingElseIs404AndTheAdminListenerNeverProxies() throws {
    try startWithAdmin()
    XCTAssertEqual(try admin("/nowhere").status, 404)
    XCTAssertEqual(try admin("/metrics/extra").status, 404)
    let proxied = try Curl.run(["-x", "http://127.0.0.1:\(adminPort)", "http://httpbin.org/hello"])
    XCTAssertEqual(proxied.status, 404)
    XCTAssertFalse(proxied.text.contains("hello from origin"))
  }

  /// RFC 9110 §9.3.2: a HEAD response has the headers a GET's has,
  /// Content-Length included, and no body. The admin endpoint closes after
  /// one response, so everything read is all it sent.
  func testHeadHasTheHeadersOfGetAndNoBody() throws {
    try startWithAdmin()
    for path in ["/policies", "/metrics", "/healthz", "/nowhere"] {
      let get = try RawHTTP.exchange(port: adminPort, "GET \(path) HTTP/1.1\r\nHost: admin\r\n\r\n")
      let head = try RawHTTP.exchange(port: adminPort, "HEAD \(path) HTTP/1.1\r\nHost: admin\r\n\r\n")
      let getEnd = try XCTUnwrap(get.range(of: "\r\n\r\n"), get)
      let headEnd = try XCTUnwrap(head.range(of: "\r\n\r\n"), head)
      XCTAssertEqual(String(head[..<headEnd.lowerBound]), String(get[..<getEnd.lowerBound]), path)
      XCTAssertTrue(head.contains("\r\nContent-Length: \(get[getEnd.upperBound...].utf8.count)\r\n"), head)
      XCTAssertEqual(
        String(head[headEnd.upperBound...]), "", "\(path): no body follows a HEAD response's head")
    }
  }

  /// Each error gets the reason phrase of its status (RFC 9110 §15), on the
  /// admin listener and on a forward one: an HTTP/2 preface (RFC 9113 §3.4)
  /// is no HTTP/1.1 request, and is answered 505.
  func testErrorStatusesCarryTheirOwnReasonPhrase() throws {
    try startWithAdmin()
    let preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    // The forward listener's refusals carry their code in the phrase too.
    for (port, suffix) in [(adminPort, ""), (proxy!.ports["forward"]!, " (pinproxy: bad-request)")] {
      let response = try RawHTTP.exchange(port: port, preface)
      XCTAssertEqual(
        response.components(separatedBy: "\r\n").first, "HTTP/1.1 505 HTTP Version Not Supported" + suffix,
        response)
    }
    // The admin listener's own limits: 1024 bytes of URI, 50 header fields.
    let cases = [
      ("GET /\(String(repeating: "a", count: 2000)) HTTP/1.1\r\nHost: admin\r\n\r\n", "414 URI Too Long"),
      (
        "GET /healthz HTTP/1.1\r\nHost: admin\r\n"
          + (0..<60).map { "X-\($0): 1\r\n" }.joined() + "\r\n", "431 Request Header Fields Too Large"
      ),
      ("GET /healthz HTTP/1.1\r\nHost: admin\r\nHost: other\r\n\r\n", "400 Bad Request"),
    ]
    for (request, status) in cases {
      let response = try RawHTTP.exchange(port: adminPort, request)
      XCTAssertEqual(response.components(separatedBy: "\r\n").first, "HTTP/1.1 \(status)", response)
    }
  }

  func testHealthzSays503WhileDraining() throws {
    try startWithAdmin(extra: "timeouts: {drain: 10s}")
    let slow = try BackgroundCommand(
      "/usr/bin/curl",
      ["-s", "-x", "http://127.0.0.1:\(proxy!.ports["forward"]!)", "http://httpbin.org/slow/3"])
    XCTAssertTrue(origins[0].waitForRequest("GET /slow/3"), "the slow request must be in flight")
    proxy!.child.signal(SIGTERM)
    XCTAssertTrue(proxy!.child.wait(for: "draining"), proxy!.log)
    let health = try admin("/healthz")
    XCTAssertEqual(health.status, 503)
    XCTAssertEqual(health.text, "draining\n")
    XCTAssertEqual(slow.finish().1, "slow\n")
  }

  func testReloadRetiresPooledUpstreamConnectionsOfTheOldGeneration() throws {
    try startWithAdmin()
    XCTAssertEqual(try through("http://httpbin.org/hello").status, 200)
    XCTAssertEqual(value(try parsedMetrics(), "pinproxy_upstream_pool_idle_connections{}"), 1)
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    // Pools retire on their own loops, asynchronously: poll for it.
    var after = try parsedMetrics()
    for _ in 0..<50 where value(after, "pinproxy_upstream_pool_idle_connections{}") != 0 {
      usleep(100_000)
      after = try parsedMetrics()
    }
    XCTAssertEqual(
      value(after, "pinproxy_upstream_pool_idle_connections{}"), 0,
      "the old generation's connection is closed")
    XCTAssertEqual(value(after, "pinproxy_config_generation{}"), 2)
    XCTAssertEqual(value(after, "pinproxy_reloads_total{result=ok}"), 1)
    XCTAssertEqual(try through("http://httpbin.org/hello").status, 200)
    // The next request could not reuse the retired connection: a second upstream handshake (full or resumed).
    let final = try parsedMetrics()
    let handshakes =
      (value(final, "pinproxy_upstream_handshakes_total{kind=full}") ?? 0)
      + (value(final, "pinproxy_upstream_handshakes_total{kind=resumed}") ?? 0)
    XCTAssertEqual(handshakes, 2, final.joined(separator: "\n"))
  }
}
