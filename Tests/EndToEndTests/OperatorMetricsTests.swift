import Foundation
import PinTestSupport
import XCTest

/// Latency histograms and pin health in `/metrics`, checked by Prometheus'
/// own `promtool` and Python parser on a live scrape; pin health on the
/// page, in `/policies` and in `check`; and the log's query-string rule.
final class OperatorMetricsTests: ProxyTestCase {
  var adminPort: Int { proxy!.ports["admin"]! }

  /// Samples parsed by prometheus_client, as name{k=v,…} → value.
  func samples() throws -> [String: Double] {
    var values: [String: Double] = [:]
    for line in try PrometheusScrape.samples(adminPort: adminPort) {
      guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
        continue
      }
      values[String(line[..<space])] = value
    }
    return values
  }

  func sum(_ values: [String: Double], _ prefix: String) -> Double {
    values.filter { $0.key.hasPrefix(prefix) }.reduce(0) { $0 + $1.value }
  }

  func testHistogramsPassPromtoolAndCountEveryRequestSent() throws {
    let config = OperatorPageTests.adminConfig(try origin())
    proxy = try ProxyProcess(config: config, listeners: ["forward", "admin"])
    let forward = proxy!.ports["forward"]!
    // Mixed traffic: 200s on one pooled connection, a pin refusal, a
    // denied host, and two requests on a new connection each.
    var sent = 0
    // curl reuses its connection for the three URLs; `-w` prints each status.
    let keepAlive = try Curl.run([
      "-x", "http://127.0.0.1:\(forward)", "http://httpbin.org/hello", "http://httpbin.org/hello",
      "http://httpbin.org/hello",
    ])
    XCTAssertEqual(keepAlive.stderr, "")
    sent += 3
    for _ in 0..<2 { XCTAssertEqual(try get("http://httpbin.org/hello", through: forward).status, 200) }
    sent += 2
    XCTAssertEqual(try get("http://pinned.httpbin.org/", through: forward).status, 502)
    XCTAssertEqual(try get("http://denied.example/", through: forward).status, 403)
    sent += 2

    let text = try Curl.run(["http://127.0.0.1:\(adminPort)/metrics"])
    XCTAssertEqual(text.status, 200)
    let file = FileManager.default.temporaryDirectory.appendingPathComponent(
      "metrics-\(UUID().uuidString).txt")
    try text.body.write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let promtool = try Promtool.path()
    let check = try Subprocess.run("/bin/sh", ["-c", "'\(promtool)' check metrics < '\(file.path)'"])
    XCTAssertEqual(check.status, 0, check.stdout + check.stderr + "\n" + text.text)
    XCTAssertEqual(check.stdout + check.stderr, "", "no lint problems")

    let values = try samples()
    let dump = values.map { "\($0.key) \($0.value)" }.sorted().joined(separator: "\n")
    XCTAssertEqual(sum(values, "pinproxy_request_duration_seconds_count{"), Double(sent), dump)
    XCTAssertEqual(sum(values, "pinproxy_requests_total{"), Double(sent), dump)
    XCTAssertEqual(values["pinproxy_request_duration_seconds_count{class=2xx,listener=forward}"], 5, dump)
    XCTAssertEqual(values["pinproxy_request_duration_seconds_count{class=5xx,listener=forward}"], 1, dump)
    XCTAssertEqual(values["pinproxy_request_duration_seconds_count{class=4xx,listener=forward}"], 1, dump)
    // Buckets are cumulative and end with every observation.
    XCTAssertEqual(
      values["pinproxy_request_duration_seconds_bucket{class=2xx,le=+Inf,listener=forward}"], 5, dump)
    XCTAssertGreaterThan(values["pinproxy_request_duration_seconds_sum{class=2xx,listener=forward}"] ?? 0, 0)
    // Every dial that gave a connection, and every trust decision, hit or miss.
    XCTAssertEqual(
      sum(values, "pinproxy_upstream_connect_duration_seconds_count{"),
      sum(values, "pinproxy_upstream_connections_total{"), dump)
    XCTAssertEqual(
      values["pinproxy_trust_evaluation_duration_seconds_count{cache=hit}"],
      values["pinproxy_fingerprint_cache_hits_total{}"], dump)
    XCTAssertEqual(
      values["pinproxy_trust_evaluation_duration_seconds_count{cache=miss}"],
      values["pinproxy_fingerprint_cache_misses_total{}"], dump)
    XCTAssertEqual(values["pinproxy_last_reload_successful{}"], 1, dump)
    // The page counts from the same cells.
    let status = try Curl.run(["http://127.0.0.1:\(adminPort)/status"])
    let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: status.body) as? [String: Any])
    let listeners = try XCTUnwrap(json["listeners"] as? [[String: Any]])
    XCTAssertEqual(listeners.first?["requests"] as? Int, sent)
    XCTAssertEqual(listeners.first?["refusals"] as? Int, 2)
  }

  /// A leaf signed now by the test intermediate, valid for `days` days,
  /// for `names` (the origin serves it with the intermediate).
  func makeLeaf(days: Int, names: [String]) throws -> (chain: String, key: String, pin: String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("leaf-\(UUID().uuidString)")
      .path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    func openssl(_ arguments: [String]) throws {
      let result = try Subprocess.run("/usr/bin/openssl", arguments, in: directory)
      guard result.status == 0 else { throw HarnessError("openssl \(arguments[0]): \(result.stderr)") }
    }
    try openssl([
      "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "leaf.key", "-out",
      "leaf.csr", "-subj", "/CN=\(names[0])",
    ])
    let extensions = """
      basicConstraints=critical,CA:FALSE
      keyUsage=critical,digitalSignature
      extendedKeyUsage=serverAuth
      subjectKeyIdentifier=hash
      authorityKeyIdentifier=keyid
      subjectAltName=\(names.map { "DNS:\($0)" }.joined(separator: ","))
      """
    try Data(extensions.utf8).write(to: URL(fileURLWithPath: directory + "/leaf.ext"))
    try openssl([
      "x509", "-req", "-in", "leaf.csr", "-CA", Fixtures.path("int-a.pem"), "-CAkey",
      Fixtures.path("int-a.key"),
      "-set_serial", "4242", "-out", "leaf.pem", "-days", String(days), "-extfile", "leaf.ext",
    ])
    let leaf = try String(contentsOfFile: directory + "/leaf.pem", encoding: .utf8)
    let intermediate = try String(contentsOfFile: Fixtures.path("int-a.pem"), encoding: .utf8)
    try (leaf + intermediate).write(toFile: directory + "/chain.pem", atomically: true, encoding: .utf8)
    let pin = try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "openssl x509 -in '\(directory)/leaf.pem' -pubkey -noout | openssl pkey -pubin -outform DER"
          + " | openssl dgst -sha256 -binary | base64",
      ])
    return (
      directory + "/chain.pem", directory + "/leaf.key",
      "sha256/" + pin.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    )
  }

  /// A rule whose chain's pinned certificate expires in 10 days with no
  /// backup pin is flagged; the same chain under a rule with a backup pin
  /// is not.
  func testPinHealthFlagsAnExpiringSinglePinAndNotARuleWithABackup() throws {
    let leaf = try makeLeaf(days: 10, names: ["soon.example", "backed.example"])
    let origin = try Origin(certificate: leaf.chain, key: leaf.key)
    origins.append(origin)
    let config = """
      admin: {address: "127.0.0.1:{port:admin}"}
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["soon.example:443:127.0.0.1:\(origin.port)", "backed.example:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      domains:
        - {domain: soon.example, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(leaf.pin)"]}
        - {domain: backed.example, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(leaf.pin)", "\(OperatorPageTests.strayPin)"]}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward", "admin"])
    let forward = proxy!.ports["forward"]!
    XCTAssertEqual(try get("http://soon.example/hello", through: forward).status, 200)
    XCTAssertEqual(try get("http://backed.example/hello", through: forward).status, 200)

    let policies = try Curl.run(["http://127.0.0.1:\(adminPort)/policies"])
    let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: policies.body) as? [String: Any])
    let domains = try XCTUnwrap(json["domains"] as? [[String: Any]])
    let soon = try XCTUnwrap(
      domains.first { $0["domain"] as? String == "soon.example" }?["pinHealth"] as? [String: Any])
    let backed = try XCTUnwrap(
      domains.first { $0["domain"] as? String == "backed.example" }?["pinHealth"] as? [String: Any])
    XCTAssertEqual(soon["matchedPin"] as? String, leaf.pin)
    XCTAssertEqual(soon["daysToExpiry"] as? Int, 9, "10 days less the seconds since signing")
    XCTAssertEqual(soon["hasBackup"] as? Bool, false)
    let warnings = try XCTUnwrap(soon["warnings"] as? [String])
    XCTAssertTrue(warnings.contains { $0.contains("expires in 9 days and no backup pin") }, "\(warnings)")
    XCTAssertTrue(warnings.contains { $0.contains("only one pin") }, "\(warnings)")
    XCTAssertEqual(backed["daysToExpiry"] as? Int, 9)
    XCTAssertEqual(backed["hasBackup"] as? Bool, true)
    XCTAssertEqual(backed["backupPins"] as? [String], [OperatorPageTests.strayPin])
    XCTAssertEqual(backed["warnings"] as? [String], [])

    let values = try samples()
    let dump = values.map { "\($0.key) \($0.value)" }.sorted().joined(separator: "\n")
    XCTAssertEqual(values["pinproxy_pin_backup_available{rule=soon.example}"], 0, dump)
    XCTAssertEqual(values["pinproxy_pin_backup_available{rule=backed.example}"], 1, dump)
    XCTAssertEqual(values["pinproxy_pin_single{rule=soon.example}"], 1, dump)
    XCTAssertEqual(values["pinproxy_pin_single{rule=backed.example}"], 0, dump)
    let expiry = try XCTUnwrap(values["pinproxy_pinned_certificate_expiry_seconds{rule=soon.example}"], dump)
    XCTAssertLessThanOrEqual(expiry, 10 * 86_400)
    XCTAssertGreaterThan(expiry, 9 * 86_400)

    let page = try Curl.run(["http://127.0.0.1:\(adminPort)/"])
    XCTAssertTrue(
      page.text.contains("soon.example: the pinned certificate CN=soon.example expires in 9 days"), page.text)
    XCTAssertFalse(page.text.contains("backed.example: "), "no warning for the rule with a backup pin")

    // Offline, `check` knows the single pin (not the chain).
    let check = try Subprocess.pinproxy(["check", "--config", proxy!.configFile])
    XCTAssertEqual(check.status, 0, check.stderr)
    XCTAssertTrue(
      check.stderr.contains("warning: rule soon.example: only one pin and no dynamic pin list"), check.stderr)
    XCTAssertFalse(check.stderr.contains("rule backed.example"), check.stderr)

    // A reload that gives soon.example a backup pin governs its health at
    // once: the health judged under the retired rule is not shown.
    try proxy!.rewrite(
      config: config.replacingOccurrences(
        of: "pinnedPublicKeyHashes: [\"\(leaf.pin)\"]}",
        with: "pinnedPublicKeyHashes: [\"\(leaf.pin)\", \"\(OperatorPageTests.strayPin)\"]}"))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let reloaded = try Curl.run(["http://127.0.0.1:\(adminPort)/policies"])
    let after = try XCTUnwrap(try JSONSerialization.jsonObject(with: reloaded.body) as? [String: Any])
    let afterSoon = try XCTUnwrap(
      (after["domains"] as? [[String: Any]])?.first { $0["domain"] as? String == "soon.example" }?[
        "pinHealth"]
        as? [String: Any])
    XCTAssertEqual(afterSoon["hasBackup"] as? Bool, true, "\(afterSoon)")
    XCTAssertEqual(afterSoon["warnings"] as? [String], [])
  }

  /// Access lines keep query strings only with `logging.queryStrings: true`.
  func testQueryStringsAreLoggedOnlyWhenConfigured() throws {
    let origin = try origin()
    proxy = try ProxyProcess(config: httpbinConfig(origin), listeners: ["forward"])
    // The origin answers 404 to /hello with a query: the line is what matters.
    XCTAssertEqual(
      try get("http://httpbin.org/hello?token=hidden", through: proxy!.ports["forward"]!).status, 404)
    XCTAssertTrue(
      proxy!.child.wait(for: "info request host=httpbin.org:443 method=GET path=/hello status=404"),
      proxy!.log)
    XCTAssertFalse(proxy!.log.contains("hidden"), proxy!.log)
    proxy!.stop()

    proxy = try ProxyProcess(
      config: httpbinConfig(origin, top: "logging: {queryStrings: true}"), listeners: ["forward"])
    XCTAssertEqual(
      try get("http://httpbin.org/hello?token=shown", through: proxy!.ports["forward"]!).status, 404)
    XCTAssertTrue(proxy!.child.wait(for: "path=\"/hello?token=shown\" status=404"), proxy!.log)
  }
}

/// Prometheus' promtool, which the test setup installs (Debian's `prometheus`).
enum Promtool {
  static func path() throws -> String {
    for candidate in ["/usr/bin/promtool", "/usr/local/bin/promtool"]
    where FileManager.default.isExecutableFile(atPath: candidate) {
      return candidate
    }
    throw HarnessError(
      "promtool is not installed (scripts/install-deps.sh installs it: apt package prometheus)")
  }
}
