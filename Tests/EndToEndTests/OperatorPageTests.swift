import Foundation
import PinTestSupport
import XCTest

/// The operator's page on the admin listener (`GET /`), rendered by headless
/// Chromium: a refused request's code, reason, expected pins and presented
/// chain are on it under the incident id the client and the log line carry;
/// hostile values a client sent show as text.
final class OperatorPageTests: ProxyTestCase {
  /// The SPKI pin no certificate has (SHA-256 of nothing): a pin that can never match.
  static let strayPin = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="

  var adminPort: Int { proxy!.ports["admin"]! }

  /// An admin listener, a forward listener, `defaults: deny`, httpbin.org
  /// validated and pinned.httpbin.org pinned to `strayPin`, both on `origin`.
  static func adminConfig(_ origin: Origin) -> String {
    """
    admin: {address: "127.0.0.1:{port:admin}"}
    listeners:
      - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
    connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)", "pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    defaults: {action: deny}
    domains:
      - {domain: httpbin.org, anchors: [test]}
      - {domain: pinned.httpbin.org, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(strayPin)"]}
    """
  }

  func startWithAdmin() throws {
    let config = OperatorPageTests.adminConfig(try origin())
    proxy = try ProxyProcess(config: config, listeners: ["forward", "admin"])
  }

  func chromium(_ url: String, screenshot: String? = nil) throws -> String {
    let (chromium, profile, headless) = try Chromium.headless()
    defer { try? FileManager.default.removeItem(at: profile) }
    let common = headless + ["--window-size=1400,2000"]
    if let screenshot {
      _ = try Subprocess.run(chromium, common + ["--screenshot=\(screenshot)", url])
    }
    let dom = try Subprocess.run(chromium, common + ["--dump-dom", url])
    XCTAssertEqual(dom.status, 0, dom.stderr)
    return dom.stdout
  }

  func testThePageShowsTheRefusalItsChainAndPinsUnderTheIncidentIdOfTheLogAndTheClient() throws {
    try startWithAdmin()
    let forward = proxy!.ports["forward"]!
    let refused = try get("http://pinned.httpbin.org/hello?token=SECRET123", through: forward)
    XCTAssertEqual(refused.status, 502, refused.text)
    let incident = try XCTUnwrap(refused.headers["pinproxy-incident"], refused.text)
    XCTAssertEqual(incident.count, 12)
    // The client's body names the incident too (full detail: the listener is on loopback).
    XCTAssertTrue(refused.text.contains("incident: \(incident)\n"), refused.text)
    XCTAssertTrue(refused.text.contains(OperatorPageTests.strayPin), "full detail lists the expected pin")
    // The log line: same incident, keys in reading order, the query left out.
    XCTAssertTrue(proxy!.child.wait(for: "incident=\(incident)"), proxy!.log)
    let line = try XCTUnwrap(proxy!.completeLogLines.first { $0.contains("incident=\(incident)") })
    let keys = line.split(separator: " ").dropFirst(3).compactMap {
      $0.split(separator: "=").first.map(String.init)
    }
    XCTAssertEqual(Array(keys.prefix(4)), ["code", "host", "rule", "reason"], line)
    XCTAssertTrue(
      line.contains("code=pin-mismatch host=pinned.httpbin.org:443 rule=pinned.httpbin.org"), line)
    XCTAssertTrue(line.contains("path=/hello "), line)
    XCTAssertFalse(line.contains("SECRET123"), "query strings are not logged by default: \(line)")
    let chainField = try XCTUnwrap(line.range(of: " chain=")).upperBound
    XCTAssertFalse(line[chainField...].contains(" incident="), "the chain closes the line: \(line)")
    let presentedPin = Fixtures.certificate("httpbin.pem").spkiPin
    XCTAssertTrue(line.contains(presentedPin), line)

    let artifacts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("Artifacts")
    try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
    let screenshot = artifacts.appendingPathComponent("operator-page.png").path
    try? FileManager.default.removeItem(atPath: screenshot)
    let dom = try chromium("http://127.0.0.1:\(adminPort)/", screenshot: screenshot)
    let size = (try? FileManager.default.attributesOfItem(atPath: screenshot)[.size] as? Int) ?? 0
    XCTAssertGreaterThan(size ?? 0, 10_000, "a rendered page, not an empty image")
    XCTAssertTrue(dom.contains("id=\"incident-\(incident)\""), dom)
    XCTAssertTrue(dom.contains("pin-mismatch"), dom)
    XCTAssertTrue(dom.contains("<code class=\"expected-pin\">\(OperatorPageTests.strayPin)</code>"), dom)
    XCTAssertTrue(dom.contains("<code class=\"presented-pin\">\(presentedPin)</code>"), dom)
    // The copy button carries the exact pin.
    XCTAssertTrue(dom.contains("data-pin=\"\(presentedPin)\""), dom)
    XCTAssertTrue(dom.contains("data-pin=\"\(OperatorPageTests.strayPin)\""), dom)
    XCTAssertFalse(dom.contains("SECRET123"), "no query string on the page")
    // Each section is there.
    for section in ["listeners", "rules", "refusals", "upstream", "latency", "reloads"] {
      XCTAssertTrue(dom.contains("id=\"\(section)\""), "section \(section)")
    }
    // The same record through /status and `pinproxy status`.
    let status = try Subprocess.pinproxy(["status", "--admin", "127.0.0.1:\(adminPort)"])
    XCTAssertEqual(status.status, 0, status.stderr)
    XCTAssertTrue(status.stdout.contains("pin-mismatch pinned.httpbin.org:443"), status.stdout)
    XCTAssertTrue(status.stdout.contains("incident \(incident)"), status.stdout)
    XCTAssertTrue(status.stdout.contains(presentedPin), status.stdout)
  }

  /// Hostile values in the Host, the path, the User-Agent and the TLS server
  /// name show on the page as text: no element, no script.
  func testHostileValuesShowAsTextOnThePage() throws {
    try startWithAdmin()
    let forward = proxy!.ports["forward"]!
    let payload = "<script>document.title='owned'</script>"
    let denied = try RawHTTP.exchange(
      port: forward,
      "GET http://denied.example/\(payload) HTTP/1.1\r\nHost: denied.example\r\nUser-Agent: \(payload)\r\n\r\n"
    )
    XCTAssertTrue(denied.hasPrefix("HTTP/1.1 403 "), denied)
    let hostile = try RawHTTP.exchange(port: forward, "GET /x HTTP/1.1\r\nHost: \(payload)\r\n\r\n")
    XCTAssertTrue(hostile.hasPrefix("HTTP/1.1 400 "), hostile)
    // A server name with markup, in a hand-edited ClientHello inside a CONNECT.
    try HandEditedClientHello.send(to: forward, serverName: "<script>a</>")
    XCTAssertTrue(proxy!.child.wait(for: "(SNI)"), proxy!.log)
    let dom = try chromium("http://127.0.0.1:\(adminPort)/")
    XCTAssertFalse(dom.contains("<title>owned"), "no injected script ran")
    XCTAssertFalse(dom.contains("<script>document.title"), "the payload is text, not an element")
    XCTAssertFalse(dom.contains("<script>a</>"), "the server name is text, not an element")
    XCTAssertTrue(dom.contains("&lt;script&gt;document.title='owned'&lt;/script&gt;"), dom)
    XCTAssertTrue(dom.contains("class=\"user-agent\">&lt;script&gt;"), "the User-Agent, escaped")
    // A Host that is no authority is refused before it is a request: the
    // page has the refusal, and nothing of the value.
    XCTAssertTrue(dom.contains("the Host header field is not a valid authority"), dom)
    XCTAssertTrue(dom.contains("&lt;script&gt;a&lt;/&gt; (SNI)"), "the server name, escaped")
    // The only script element is the page's own (allowed by its hash).
    XCTAssertEqual(dom.components(separatedBy: "<script>").count - 1, 1, dom)
    let page = try Curl.run(["http://127.0.0.1:\(adminPort)/"])
    XCTAssertTrue(
      page.headers["content-security-policy"]?.hasPrefix(
        "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-")
        ?? false, page.text)
  }

  /// Without a token, the views answer only a Host that is an address or
  /// `localhost` (a rebound DNS name in a browser is refused); and a C1
  /// control a client sent never reaches the terminal of `pinproxy status`.
  func testTheViewsRefuseAReboundHostAndStatusEscapesForTheTerminal() throws {
    try startWithAdmin()
    let rebound = try RawHTTP.exchange(port: adminPort, "GET / HTTP/1.1\r\nHost: attacker.example\r\n\r\n")
    XCTAssertTrue(rebound.hasPrefix("HTTP/1.1 403 "), rebound)
    for host in ["127.0.0.1:\(adminPort)", "localhost:\(adminPort)", "[::1]:\(adminPort)"] {
      let page = try RawHTTP.exchange(port: adminPort, "GET /status HTTP/1.1\r\nHost: \(host)\r\n\r\n")
      XCTAssertTrue(page.hasPrefix("HTTP/1.1 200 "), "\(host): \(page.prefix(200))")
    }
    // CSI (U+009B) as UTF-8 in a User-Agent: obs-text, which a field may carry.
    let response = try RawHTTP.exchange(
      port: proxy!.ports["forward"]!,
      "GET http://denied.example/ HTTP/1.1\r\nHost: denied.example\r\nUser-Agent: a\u{9B}31mb\r\n\r\n")
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 403 "), response)
    for arguments in [["--json"], []] {
      let status = try Subprocess.pinproxy(["status", "--admin", "127.0.0.1:\(adminPort)"] + arguments)
      XCTAssertEqual(status.status, 0, status.stderr)
      XCTAssertFalse(status.stdout.unicodeScalars.contains { $0.value == 0x9B }, "no raw CSI: \(arguments)")
    }
    let json = try Subprocess.pinproxy(["status", "--admin", "127.0.0.1:\(adminPort)", "--json"])
    XCTAssertTrue(json.stdout.contains("a\\u009b31mb"), json.stdout)
    XCTAssertNotNil(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)), "still JSON")
  }

  /// `listeners[].refusalDetail: summary`: the client gets the code, one
  /// line and the incident id; the page keeps the rest.
  func testSummaryRefusalDetailTellsTheClientLessAndThePageAll() throws {
    let origin = try origin()
    let config = """
      admin: {address: "127.0.0.1:{port:admin}"}
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, refusalDetail: summary}
      connectTo: ["pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      domains:
        - {domain: pinned.httpbin.org, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(OperatorPageTests.strayPin)"]}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward", "admin"])
    let refused = try get("http://pinned.httpbin.org/", through: proxy!.ports["forward"]!)
    XCTAssertEqual(refused.status, 502)
    let incident = try XCTUnwrap(refused.headers["pinproxy-incident"])
    XCTAssertEqual(
      refused.text,
      "pinproxy: pin-mismatch: This site's certificate does not match what it is pinned to\nincident: \(incident)\n"
    )
    XCTAssertFalse(refused.text.contains("sha256/"), "no pins in a summary")
    let status = try Curl.run(["http://127.0.0.1:\(adminPort)/status"])
    let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: status.body) as? [String: Any])
    let refusals = try XCTUnwrap(json["refusals"] as? [[String: Any]])
    XCTAssertEqual(refusals.first?["incident"] as? String, incident)
    XCTAssertTrue((refusals.first?["reason"] as? String)?.contains(OperatorPageTests.strayPin) ?? false)
  }
}
