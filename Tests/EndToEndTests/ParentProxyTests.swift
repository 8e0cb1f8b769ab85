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
  /// Every parent a test started, stopped at its end.
  var parents: [SquidParent] = []

  override func tearDown() {
    for parent in parents { parent.stop() }
    parents = []
    super.tearDown()
  }

  /// Squid requiring alice / wonderland, resolving `names` to 127.0.0.1.
  func startSquid(names: [String] = ["httpbin.org"], inspecting: Bool = false) throws -> SquidParent {
    let parent = try SquidParent(names: names, user: "alice", password: "wonderland", inspecting: inspecting)
    parents.append(parent)
    return parent
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
    try startProxy(parentPort: parentPort, credentialsFile: credentialsFile, originPort: origin.port)
  }

  func startProxy(parentPort: Int, credentialsFile: String, originPort: Int) throws -> Int {
    let process = try ProxyProcess(
      config: parentConfig(parentPort: parentPort, credentialsFile: credentialsFile, originPort: originPort),
      listeners: ["forward"])
    proxy = process
    return process.ports["forward"]!
  }

  /// One forward listener that may reach `originPort`, parent `corp` with
  /// the credentials, and the rule for httpbin.org choosing `choice`.
  func parentConfig(
    parentPort: Int, credentialsFile: String, originPort: Int, choice: String = "corp", top: String = ""
  ) -> String {
    """
    \(top)
    listeners:
      - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(originPort)]}
    parentProxies:
      corp: {url: "http://127.0.0.1:\(parentPort)", credentialsFile: "\(credentialsFile)"}
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    defaults: {action: deny}
    domains:
      - {domain: httpbin.org, anchors: [test], parentProxy: \(choice)}
    """
  }

  func testARequestIsServedThroughTheParentWithPinproxysOwnTLS() throws {
    let origin = try origin()
    let parent = try startSquid()
    let port = try startProxy(
      parentPort: parent.port, credentialsFile: try credentials("alice:wonderland"), origin: origin)
    for _ in 0..<3 {
      let result = try get("http://httpbin.org:\(origin.port)/hello", through: port)
      XCTAssertEqual(result.status, 200, result.text)
    }
    // Squid logs a tunnel when it ends: the pooled one ends with the proxy.
    proxy!.stop()
    XCTAssertTrue(
      parent.waitForConnects(to: "httpbin.org:\(origin.port)"),
      "the tunnel went through the parent: \(parent.accessLog)")
    XCTAssertEqual(
      parent.connects(to: "httpbin.org"), 1,
      "three requests, one pooled connection through one tunnel: \(parent.accessLog)")
    XCTAssertTrue(parent.accessLog.contains(" alice "), "the parent saw the credentials: \(parent.accessLog)")
    XCTAssertTrue(proxy!.child.wait(for: " parent=corp received="), "the access line names the parent")
    XCTAssertFalse(proxy!.log.contains("wonderland"), "the password is never logged")
    XCTAssertFalse(
      origin.requests.joined().lowercased().contains("proxy-authorization"),
      "the parent's credentials never reach the origin")
  }

  /// The point of pinning behind a corporate proxy: the parent inspects TLS
  /// with a CA the company trusts, and a pinned rule still refuses it.
  func testAnInspectingParentIsRefusedByThePinAndSeenByARuleWithoutOne() throws {
    let origin = try origin()
    let parent = try startSquid(names: ["httpbin.org", "inspected.httpbin.org"], inspecting: true)
    let credentialsFile = try credentials("alice:wonderland")
    let pin = Fixtures.certificate("int-a.pem").spkiPin
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
        parentProxies:
          corp: {url: "http://127.0.0.1:\(parent.port)", credentialsFile: "\(credentialsFile)"}
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
          company: {files: ["\(parent.inspectionCA)"]}
        defaults: {action: deny, parentProxy: corp}
        domains:
          - {domain: httpbin.org, anchors: [test, company], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(pin)"]}
          - {domain: inspected.httpbin.org, anchors: [company]}
        """, listeners: ["forward"])
    proxy = process
    let port = process.ports["forward"]!
    // Pinned: the company's CA is trusted, the minted leaf chains to it, and
    // still it is not the key the rule pins.
    let pinned = try get("http://httpbin.org:\(origin.port)/hello", through: port)
    assertRefused(pinned, 502, "pin-mismatch")
    XCTAssertFalse(pinned.text.contains("parent proxy"), "a trust failure is never blamed on the parent")
    // Without a pin, trusting only the company's CA: served, so what came
    // through the tunnel really was the parent's minted leaf (the origin's
    // own chain leads to the test root, which this rule does not trust).
    let inspected = try get("http://inspected.httpbin.org:\(origin.port)/hello", through: port)
    XCTAssertEqual(inspected.status, 200, inspected.text)
  }

  /// SOCKS5 parents (microsocks), with RFC 1929 credentials and without: the
  /// parent resolves the name (`localhost`, the only one microsocks can
  /// resolve here) or takes an address, pinproxy checks the origin's chain
  /// inside; the dials counted.
  /// microsocks on a free port, with credentials or without; stopped at the test's end.
  func startMicrosocks(user: String? = nil, password: String? = nil) throws -> Int {
    let socks = try SocksParent(user: user, password: password)
    addTeardownBlock { socks.stop() }
    return socks.port
  }

  func testASocks5ParentWithCredentialsCarriesTheRequests() throws {
    let origin = try origin()
    let socksPort = try startMicrosocks(user: "bob", password: "builder")
    let openPort = try startMicrosocks()
    let good = try credentials("bob:builder")
    let bad = try credentials("bob:wrecker")
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
        admin: {address: "127.0.0.1:{port:admin}"}
        parentProxies:
          socks: {url: "socks5://127.0.0.1:\(socksPort)", credentialsFile: "\(good)"}
          wrong: {url: "socks5://127.0.0.1:\(socksPort)", credentialsFile: "\(bad)"}
          open: {url: "socks5://127.0.0.1:\(openPort)"}
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny, parentProxy: wrong}
        domains:
          - {domain: localhost, anchors: [test], validatesDomainName: false, parentProxy: socks}
          - {domain: httpbin.org, anchors: [test]}
          - {domain: 127.0.0.1, anchors: [test], validatesDomainName: false, parentProxy: open}
        """, listeners: ["forward", "admin"])
    proxy = process
    let port = process.ports["forward"]!
    let served = try get("http://localhost:\(origin.port)/hello", through: port)
    XCTAssertEqual(served.status, 200, served.text)
    XCTAssertTrue(origin.waitForRequest("GET /hello"), "the origin got the request through the tunnel")
    // A parent without credentials, asked for an address (SOCKS5 address type 1).
    let literal = try get("http://127.0.0.1:\(origin.port)/hello", through: port)
    XCTAssertEqual(literal.status, 200, literal.text)
    let refused = try get("http://httpbin.org:\(origin.port)/hello", through: port)
    assertRefused(refused, 502, "parent-proxy-refused")
    XCTAssertTrue(refused.text.contains("the username and password were refused"), refused.text)
    let metrics = try Curl.run(["http://127.0.0.1:\(process.ports["admin"]!)/metrics"]).text
    XCTAssertTrue(
      metrics.contains(#"pinproxy_parent_proxy_connects_total{parent="socks",result="open"} 1"#), metrics)
    XCTAssertTrue(
      metrics.contains(#"pinproxy_parent_proxy_connects_total{parent="wrong",result="refused"} 1"#), metrics)
    XCTAssertFalse(
      process.log.contains("builder") || process.log.contains("wrecker"), "no password is logged")
    // Each rule's parent on /policies and the operator's page, never its credentials.
    let policies = try Curl.run(["http://127.0.0.1:\(process.ports["admin"]!)/policies"]).text
    XCTAssertTrue(policies.contains(#""url" : "socks5://127.0.0.1:\#(socksPort)""#), policies)
    XCTAssertTrue(policies.contains(#""name" : "wrong""#), policies)
    XCTAssertFalse(policies.contains("builder"), policies)
    let page = try Curl.run(["http://127.0.0.1:\(process.ports["admin"]!)/"]).text
    XCTAssertTrue(page.contains("through parent proxy socks (socks5://127.0.0.1:\(socksPort))"), page)
    XCTAssertFalse(page.contains("builder"), page)
  }

  /// Every kind of upstream connection of a rule goes through its parent:
  /// an intercepted CONNECT (pinproxy's own TLS to the client and to the
  /// origin) and a tunnel listener's.
  func testAnInterceptedConnectAndATunnelListenerGoThroughTheParent() throws {
    let origin = try origin()
    let parent = try startSquid()
    let credentialsFile = try credentials("alice:wonderland")
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
          - {name: bank, address: "127.0.0.1:{port:bank}", mode: tunnel, upstream: "httpbin.org:\(origin.port)"}
        parentProxies:
          corp: {url: "http://127.0.0.1:\(parent.port)", credentialsFile: "\(credentialsFile)"}
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny, parentProxy: corp}
        domains:
          - {domain: httpbin.org, anchors: [test]}
        """, listeners: ["forward", "bank"])
    proxy = process
    let ca = process.directory.appendingPathComponent("state/ca.pem").path
    let intercepted = try Curl.run([
      "-x", "http://127.0.0.1:\(process.ports["forward"]!)", "--cacert", ca,
      "https://httpbin.org:\(origin.port)/hello",
    ])
    XCTAssertEqual(intercepted.status, 200, intercepted.text)
    let tunnelled = try Curl.run([
      "-H", "Host: httpbin.org", "http://127.0.0.1:\(process.ports["bank"]!)/hello",
    ])
    XCTAssertEqual(tunnelled.status, 200, tunnelled.text)
    process.stop()
    _ = parent.waitForConnects(to: "httpbin.org:\(origin.port)", count: 2)
    XCTAssertEqual(
      parent.connects(to: "httpbin.org:\(origin.port)"), 2,
      "one tunnel for the intercepted CONNECT, one for the tunnel listener: \(parent.accessLog)")
  }

  /// HTTP/2 to the origin inside the tunnel: ALPN is pinproxy's, and
  /// several requests share one h2 connection through one CONNECT.
  func testAnHTTP2UpstreamRunsInsideTheTunnel() throws {
    let h2 = try H2Origin()
    defer { h2.stop() }
    let parent = try startSquid()
    let port = try startProxy(
      parentPort: parent.port, credentialsFile: try credentials("alice:wonderland"), originPort: h2.port)
    let process = proxy!
    for _ in 0..<3 {
      let result = try get("http://httpbin.org:\(h2.port)/hello", through: port)
      XCTAssertEqual(result.status, 200, result.text)
    }
    XCTAssertEqual(h2.lines.filter { $0.hasPrefix("connection") }.count, 1, "\(h2.lines)")
    XCTAssertEqual(h2.lines.filter { $0.hasPrefix("request") }.count, 3, "\(h2.lines)")
    XCTAssertTrue(process.child.wait(for: "upstream_protocol=h2", timeout: 10), process.log)
  }

  /// A reload that takes the rule off its parent drains nothing, and every
  /// connection made after it goes direct.
  func testAReloadThatDropsTheParentGovernsEveryNewConnection() throws {
    let origin = try origin()
    let parent = try startSquid()
    let credentialsFile = try credentials("alice:wonderland")
    func config(_ choice: String) -> String {
      parentConfig(
        parentPort: parent.port, credentialsFile: credentialsFile, originPort: origin.port, choice: choice,
        top: "connectTo: [\"httpbin.org:\(origin.port):127.0.0.1:\(origin.port)\"]")
    }
    let process = try ProxyProcess(config: config("corp"), listeners: ["forward"])
    proxy = process
    let port = process.ports["forward"]!
    XCTAssertEqual(try get("http://httpbin.org:\(origin.port)/hello", through: port).status, 200)
    try process.rewrite(config: config("direct"))
    process.child.signal(SIGHUP)
    XCTAssertTrue(process.child.wait(for: "reload-ok"), process.log)
    XCTAssertEqual(try get("http://httpbin.org:\(origin.port)/hello", through: port).status, 200)
    // The access log is written off the request path: wait for both lines.
    var requests: [Substring] = []
    for _ in 0..<200 {
      requests = process.log.split(separator: "\n").filter { $0.contains(" info request ") }
      if requests.count >= 2 { break }
      usleep(50_000)
    }
    XCTAssertEqual(requests.count, 2, process.log)
    XCTAssertTrue(requests.first?.contains("parent=corp") == true, "before the reload: \(requests)")
    XCTAssertFalse(requests.last?.contains("parent=") == true, "after it, direct: \(requests)")
  }

  /// The internal-address guard holds through a parent too: a loopback
  /// address no rule names is refused before the parent is asked.
  func testAnInternalAddressIsRefusedBeforeTheParentIsAsked() throws {
    let origin = try origin()
    let parent = try SquidParent()
    parents.append(parent)
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
        parentProxies:
          corp: {url: "http://127.0.0.1:\(parent.port)"}
        defaults: {action: validate, parentProxy: corp}
        """, listeners: ["forward"])
    proxy = process
    let result = try get("http://127.0.0.1:\(origin.port)/hello", through: process.ports["forward"]!)
    assertRefused(result, 403, "denied-by-policy")
    process.stop()
    parent.stop()
    XCTAssertEqual(parent.connects(to: "127.0.0.1"), 0, parent.accessLog)
    XCTAssertTrue(origin.requests.isEmpty)
  }

  /// A parent that is this proxy's own listener would send every tunnel
  /// round again, one more connection per turn until a limit: the dial's
  /// guard refuses it when the parent's address resolves, before any
  /// connection to it, and says why.
  func testAParentThatIsThisProxysOwnListenerIsRefused() throws {
    let origin = try origin()
    let process = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, allowedConnectPorts: [443, \(origin.port)]}
        parentProxies:
          itself: {url: "http://127.0.0.1:{port:forward}"}
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny}
        domains:
          - {domain: httpbin.org, anchors: [test], parentProxy: itself}
        """, listeners: ["forward"])
    proxy = process
    let result = try get("http://httpbin.org:\(origin.port)/hello", through: process.ports["forward"]!)
    assertRefused(result, 403, "denied-by-policy")
    XCTAssertTrue(result.text.contains("parent proxy itself is this proxy's own listener"), result.text)
    XCTAssertTrue(process.waitForLine { $0.contains(" refused ") }, process.log)
    XCTAssertFalse(
      process.log.contains("CONNECT"), "the proxy never asked itself for a tunnel: \(process.log)")
    XCTAssertTrue(origin.requests.isEmpty)
  }

  func testWrongCredentialsAreTheParentsRefusalWithItsStatusLine() throws {
    let origin = try origin()
    let parent = try startSquid()
    let port = try startProxy(
      parentPort: parent.port, credentialsFile: try credentials("alice:queenofhearts"), origin: origin)
    let result = try get("http://httpbin.org:\(origin.port)/hello", through: port)
    assertRefused(result, 502, "parent-proxy-refused")
    XCTAssertTrue(result.text.contains("parent proxy corp"), result.text)
    XCTAssertTrue(result.text.contains("407 Proxy Authentication Required"), result.text)
    XCTAssertFalse(proxy!.log.contains("queenofhearts"), "the password is never logged")
    XCTAssertTrue(origin.requests.isEmpty, "nothing reached the origin")
  }

  func testAParentThatIsDownIsUnreachableNotTheOrigin() throws {
    let origin = try origin()
    let closed = try OpenSSLServer.closedPort()
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
