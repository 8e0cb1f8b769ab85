import Foundation
import PinTestSupport
import XCTest

/// Who may use the admin endpoint: a bearer token (`admin.tokenFile`),
/// the networks that may connect (`admin.allowedClients`), and scrapers
/// that read `/metrics` and `/healthz` without the token
/// (`admin.metricsClients`). Real curl from 127.0.0.x addresses.
final class AdminAccessTests: ProxyTestCase {
  var scratch: URL!
  static let token = "5f0c1d2e3b4a59687766554433221100aabbccddeeff"

  override func setUpWithError() throws {
    scratch = FileManager.default.temporaryDirectory.appendingPathComponent("admin-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
  }

  override func tearDown() {
    super.tearDown()
    try? FileManager.default.removeItem(at: scratch)
  }

  var adminPort: Int { proxy!.ports["admin"]! }

  /// A token file as an operator writes it: the token and a newline.
  func tokenFile(_ token: String = AdminAccessTests.token) throws -> String {
    let path = scratch.appendingPathComponent("token").path
    try (token + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func start(admin: String) throws {
    proxy = try ProxyProcess(
      config: """
        admin: \(admin)
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
        defaults: {action: deny}
        domains: []
        """, listeners: ["forward", "admin"])
  }

  /// One admin request from `source`, with `headers`.
  func admin(_ path: String, from source: String = "127.0.0.1", _ headers: [String] = []) throws -> CurlResult
  {
    try Curl.run(
      ["--interface", source] + headers.flatMap { ["-H", $0] } + ["http://127.0.0.1:\(adminPort)\(path)"])
  }

  func testTokenFileOnLoopbackRequiresTheBearerToken() throws {
    try start(admin: #"{address: "127.0.0.1:{port:admin}", tokenFile: "\#(try tokenFile())"}"#)
    for path in ["/policies", "/metrics", "/healthz"] {
      let missing = try admin(path)
      XCTAssertEqual(missing.status, 401, "\(path) without a token: \(missing.text)")
      XCTAssertEqual(missing.headers["www-authenticate"], #"Bearer realm="pinproxy-admin""#, path)
      XCTAssertFalse(missing.text.contains("domains"), missing.text)
    }
    let right = try admin("/policies", ["Authorization: Bearer \(Self.token)"])
    XCTAssertEqual(right.status, 200, right.text)
    XCTAssertNotNil(try? JSONSerialization.jsonObject(with: right.body), right.text)
    XCTAssertEqual(try admin("/metrics", ["Authorization: Bearer \(Self.token)"]).status, 200)
    // The scheme is case-insensitive (RFC 9110 §11.1).
    XCTAssertEqual(try admin("/healthz", ["Authorization: bearer \(Self.token)"]).status, 200)
    for wrong in [
      "Bearer \(Self.token.dropLast())", "Bearer \(Self.token)0", "Bearer \(Self.token.uppercased())",
      "Basic \(Self.token)", "Bearer", "Bearer \(Self.token) extra",
    ] {
      let refused = try admin("/policies", ["Authorization: \(wrong)"])
      XCTAssertEqual(refused.status, 401, "\(wrong): \(refused.text)")
      XCTAssertEqual(refused.headers["www-authenticate"], #"Bearer realm="pinproxy-admin""#, wrong)
    }
    XCTAssertFalse(proxy!.log.contains(Self.token), "the token is never logged")
  }

  func testMetricsClientsReadMetricsWithoutTheTokenAndNothingElse() throws {
    try start(
      admin: """
        {address: "127.0.0.1:{port:admin}", allowedClients: ["127.0.0.2/32"], tokenFile: "\(try tokenFile())", metricsClients: ["127.0.0.3/32"]}
        """)
    let bearer = ["Authorization: Bearer \(Self.token)"]
    // The scraper: /metrics and /healthz without a token; /policies never, not even with it.
    let scraped = try admin("/metrics", from: "127.0.0.3")
    XCTAssertEqual(scraped.status, 200, scraped.text)
    XCTAssertTrue(scraped.text.contains("pinproxy_config_generation"), scraped.text)
    XCTAssertEqual(try admin("/healthz", from: "127.0.0.3").text, "ok\n")
    XCTAssertEqual(try admin("/policies", from: "127.0.0.3").status, 403)
    XCTAssertEqual(try admin("/policies", from: "127.0.0.3", bearer).status, 403)

    // The admin's client: everything, with the token.
    let noToken = try admin("/policies", from: "127.0.0.2")
    XCTAssertEqual(noToken.status, 401, noToken.text)
    XCTAssertEqual(noToken.headers["www-authenticate"], #"Bearer realm="pinproxy-admin""#)
    XCTAssertEqual(try admin("/metrics", from: "127.0.0.2").status, 401, "a client is no scraper")
    XCTAssertEqual(try admin("/policies", from: "127.0.0.2", bearer).status, 200)
    XCTAssertEqual(try admin("/metrics", from: "127.0.0.2", bearer).status, 200)

    // Anyone else is closed at accept, token or not: no HTTP answer at all.
    for source in ["127.0.0.4", "127.0.0.1"] {
      let result = try Subprocess.run(
        "/usr/bin/curl",
        [
          "-s", "-S", "--max-time", "10", "-o", "/dev/null", "-w", "%{http_code}", "--interface", source,
          "-H",
          bearer[0], "http://127.0.0.1:\(adminPort)/metrics",
        ])
      XCTAssertNotEqual(result.status, 0, "\(source) must be refused at accept: \(result.stdout)")
      XCTAssertEqual(result.stdout, "000", "\(source): no HTTP status")
    }
    XCTAssertTrue(proxy!.child.wait(for: "client=127.0.0.4 "), proxy!.log)
    let line = proxy!.completeLogLines.first {
      $0.contains(" client-refused ") && $0.contains("client=127.0.0.4 ")
    }
    XCTAssertTrue(line?.contains("listener=admin") ?? false, line ?? proxy!.log)
    let metrics = try admin("/metrics", from: "127.0.0.3").text
    XCTAssertTrue(
      metrics.contains(#"pinproxy_clients_refused_total{listener="admin",reason="address"} 2"#), metrics)
  }

  func testCheckRefusesAnAdminEndpointOffLoopbackWithoutRulesOrToken() throws {
    let file = scratch.appendingPathComponent("pinproxy.yaml").path
    try """
    admin:
      address: "0.0.0.0:9090"
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward}
    """.write(toFile: file, atomically: true, encoding: .utf8)
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2, check.stdout + check.stderr)
    XCTAssertTrue(
      check.stderr.contains(
        "\(file):2:12: admin.address: the admin endpoint on 0.0.0.0:9090 would be open to every host"),
      check.stderr)
    // A token file makes it load.
    try """
    admin:
      address: "0.0.0.0:9090"
      tokenFile: "\(try tokenFile())"
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward}
    """.write(toFile: file, atomically: true, encoding: .utf8)
    let guarded = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(guarded.status, 0, guarded.stderr)
  }

  func testCheckRefusesATokenTooShortToGuard() throws {
    let file = scratch.appendingPathComponent("pinproxy.yaml").path
    let token = try tokenFile("short-token")
    try """
    admin: {address: "127.0.0.1:9090", tokenFile: "\(token)"}
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward}
    """.write(toFile: file, atomically: true, encoding: .utf8)
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2, check.stdout + check.stderr)
    XCTAssertTrue(
      check.stderr.contains("token file \(token) must hold one token of at least 16"), check.stderr)
    XCTAssertFalse(check.stderr.contains("short-token"), "the token itself is not printed")
  }
}
