import Foundation
import PinTestSupport
import XCTest

/// The PAC file a forward listener writes from the policy, read by real
/// engines: Debian's pacparser (Mozilla's SpiderMonkey-based engine) and
/// headless Chromium (`--proxy-pac-url`). One scenario per test.
final class PACTests: ProxyTestCase {
  var port: Int { proxy!.ports["forward"]! }

  /// Rules for pinned.httpbin.org (with its subdomains) and api.test, a passthrough
  /// for *.passed.test, everything else denied; `extra` joins the listener.
  func config(_ origin: Origin, extra: String = "", moreDomains: String = "") -> String {
    """
    listeners:
      - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, passthrough: ["*.passed.test"]\(extra)}
    connectTo: ["pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    defaults: {action: deny}
    domains:
      - {domain: pinned.httpbin.org, includesSubdomains: true, anchors: [test]}
      - {domain: api.test, anchors: [test]}
    \(moreDomains)
    """
  }

  /// pacparser's answers for each URL under the file at `path` (Debian's
  /// python3-pacparser, on the system Python).
  func pacparser(_ path: String, _ urls: [String]) throws -> [String] {
    let python = "/usr/bin/python3"
    let probe = try Subprocess.run(python, ["-c", "import pacparser"])
    guard probe.status == 0 else {
      throw HarnessError(
        "python3-pacparser is required (scripts/install-deps.sh installs it): \(probe.stderr)")
    }
    let script = """
      import sys, urllib.parse, pacparser
      pacparser.init()
      pacparser.parse_pac_file(sys.argv[1])
      for url in sys.argv[2:]:
          print(pacparser.find_proxy(url, urllib.parse.urlsplit(url).hostname))
      """
    let result = try Subprocess.run(python, ["-c", script, path] + urls)
    XCTAssertEqual(result.status, 0, result.stderr)
    return result.stdout.split(separator: "\n").map(String.init)
  }

  func fetchPAC(_ extra: [String] = []) throws -> CurlResult {
    try Curl.run(["http://127.0.0.1:\(port)/proxy.pac"] + extra)
  }

  /// The file routes exactly what the policy governs through this listener
  /// (pacparser decides), is served with its type, an ETag and a cache
  /// lifetime, answers If-None-Match with 304, is there as /wpad.dat too, and
  /// changes with a reload that adds a rule.
  func testTheFileRoutesWhatThePolicyGovernsAndFollowsReloads() throws {
    let origin = try origin()
    proxy = try ProxyProcess(config: config(origin), listeners: ["forward"])
    let served = try fetchPAC()
    XCTAssertEqual(served.status, 200, served.text)
    XCTAssertEqual(served.headers["content-type"], "application/x-ns-proxy-autoconfig")
    XCTAssertEqual(served.headers["cache-control"], "max-age=300")
    let etag = try XCTUnwrap(served.headers["etag"])
    let file = proxy!.directory.appendingPathComponent("proxy.pac").path
    try served.body.write(to: URL(fileURLWithPath: file))
    let through = "PROXY 127.0.0.1:\(port)"
    XCTAssertEqual(
      try pacparser(
        file,
        [
          "https://pinned.httpbin.org/a", "https://deep.sub.pinned.httpbin.org/", "http://API.test/x",
          "https://www.api.test/",
          "https://x.passed.test/", "https://example.com/", "https://notpinned.httpbin.org/",
        ]),
      [through, through, through, "DIRECT", through, "DIRECT", "DIRECT"])
    XCTAssertEqual(try fetchPAC(["-H", "If-None-Match: \(etag)"]).status, 304)
    XCTAssertEqual(try Curl.run(["http://127.0.0.1:\(port)/wpad.dat"]).body, served.body)
    // A reload adds a rule: the file (and its ETag) change.
    try proxy!.rewrite(config: config(origin, moreDomains: "  - {domain: example.com}"))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let reloaded = try fetchPAC()
    XCTAssertNotEqual(reloaded.headers["etag"], etag)
    try reloaded.body.write(to: URL(fileURLWithPath: file))
    XCTAssertEqual(try pacparser(file, ["https://example.com/"]), [through])
  }

  /// PAC fetchers send no proxy credentials: a listener with proxyAuth
  /// serves the file without them (and still challenges proxied requests);
  /// `pac: false` turns it off.
  func testServedWithoutProxyCredentialsAndOffWithPacFalse() throws {
    let origin = try origin()
    let htpasswd = FileManager.default.temporaryDirectory.appendingPathComponent(
      "pac-users-\(UUID().uuidString)"
    ).path
    try Htpasswd.write(htpasswd, [("alice", "Corr3ct-Horse-7731")])
    defer { try? FileManager.default.removeItem(atPath: htpasswd) }
    proxy = try ProxyProcess(
      config: config(origin, extra: ", proxyAuth: {htpasswd: \"\(htpasswd)\"}"), listeners: ["forward"])
    XCTAssertEqual(try fetchPAC().status, 200)
    XCTAssertEqual(try Curl.run(["-x", "http://127.0.0.1:\(port)", "http://api.test/"]).status, 407)
    try proxy!.rewrite(config: config(origin, extra: ", pac: false"))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let off = try fetchPAC()
    XCTAssertEqual(off.status, 400, off.text)
    XCTAssertTrue(off.text.contains("absolute-form"), off.text)
  }

  /// Headless Chromium configured with only the PAC URL: the governed host
  /// goes through pinproxy (its request carries pinproxy's Via and is
  /// logged), another host goes directly (no Via, no log line).
  func testChromiumSendsOnlyTheGovernedHostThroughTheProxy() throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: config(origin), listeners: ["forward"])
    let (chromium, profile, headless) = try Chromium.headless()
    defer { try? FileManager.default.removeItem(at: profile) }
    let common =
      headless + [
        "--proxy-pac-url=http://127.0.0.1:\(port)/proxy.pac", "--ignore-certificate-errors",
        "--host-resolver-rules=MAP direct.test 127.0.0.1:\(origin.port)",
      ]
    let proxied = try Subprocess.run(chromium, common + ["--dump-dom", "https://pinned.httpbin.org/headers"])
    XCTAssertTrue(proxied.stdout.contains("Via: "), proxied.stdout + proxied.stderr)
    let direct = try Subprocess.run(chromium, common + ["--dump-dom", "https://direct.test/headers"])
    XCTAssertTrue(direct.stdout.lowercased().contains("host: direct.test"), direct.stdout + direct.stderr)
    XCTAssertFalse(direct.stdout.contains("Via: "), direct.stdout)
    XCTAssertTrue(proxy!.waitForLine { $0.contains(" request ") && $0.contains("host=pinned.httpbin.org") })
    let lines = proxy!.completeLogLines.filter { $0.contains(" request ") }
    XCTAssertTrue(lines.contains { $0.contains("host=pinned.httpbin.org") }, proxy!.log)
    XCTAssertFalse(lines.contains { $0.contains("direct.test") }, proxy!.log)
  }
}
