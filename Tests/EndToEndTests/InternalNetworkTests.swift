import Foundation
import PinTestSupport
import XCTest

/// The egress guard for hosts no rule names, end to end: the proxy in one
/// network namespace, an origin on 10.1.2.3 in another, joined by a veth
/// pair and with no route anywhere else (nothing can leave the machine).
/// `defaults` never connects into private space, whether the client names
/// the address, a name resolving to it, or an IPv6 form carrying it; a rule
/// that names the host reaches it, and `defaults.allowedNetworks` opens it.
final class InternalNetworkTests: ProxyTestCase {
  var proxyNamespace = ""
  var requestLog = ""

  /// Both namespaces, the link, the names (`/etc/hosts` as the proxy's
  /// namespace sees it) and the origin on 10.1.2.3:443; returns the origin.
  func startOrigin() throws -> ChildProcess {
    proxyNamespace = try NetworkNamespace.make(for: self, prefix: "ppe")
    let originNamespace = try NetworkNamespace.make(for: self, prefix: "ppo")
    let suffix = String(proxyNamespace.suffix(6))
    let ip = NetworkNamespace.ip
    for arguments in [
      ["link", "add", "vex\(suffix)", "type", "veth", "peer", "name", "veo\(suffix)"],
      ["link", "set", "vex\(suffix)", "netns", proxyNamespace],
      ["link", "set", "veo\(suffix)", "netns", originNamespace],
      ["-n", proxyNamespace, "addr", "add", "10.1.2.1/24", "dev", "vex\(suffix)"],
      ["-n", originNamespace, "addr", "add", "10.1.2.3/24", "dev", "veo\(suffix)"],
      ["-n", proxyNamespace, "link", "set", "vex\(suffix)", "up"],
      ["-n", originNamespace, "link", "set", "veo\(suffix)", "up"],
    ] {
      let result = try Subprocess.run(ip, arguments)
      guard result.status == 0 else {
        throw HarnessError("ip \(arguments.joined(separator: " ")): \(result.stderr)")
      }
    }
    try NetworkNamespace.setHosts(
      proxyNamespace, "127.0.0.1 localhost\n10.1.2.3 named.test internal.test\n")
    requestLog = NSTemporaryDirectory() + "internal-origin-\(UUID().uuidString).log"
    FileManager.default.createFile(atPath: requestLog, contents: Data())
    addTeardownBlock { [requestLog] in try? FileManager.default.removeItem(atPath: requestLog) }
    let origin = try NetworkNamespace.launch(
      originNamespace,
      [
        "/usr/bin/python3", Fixtures.directory + "/origin.py", "--bind", "10.1.2.3", "--port", "443",
        "--cert",
        Fixtures.path("httpbin-chain.pem"), "--key", Fixtures.path("httpbin.key"), "--log", requestLog,
      ])
    guard origin.wait(for: "READY") else { throw HarnessError("origin: \(origin.currentOutput)") }
    return origin
  }

  func config(defaults: String) -> String {
    """
    listeners:
      - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    defaults: \(defaults)
    domains:
      - {domain: named.test, anchors: [test], validatesDomainName: false}
    """
  }

  /// curl through the proxy inside its namespace: status line, the
  /// Pinproxy-Error field and the body, as one text.
  func fetch(_ url: String) throws -> String {
    try NetworkNamespace.exec(
      proxyNamespace,
      [
        "/usr/bin/curl", "-s", "-i", "--max-time", "15", "-x", "http://127.0.0.1:\(proxy!.ports["forward"]!)",
        url,
      ]
    ).stdout
  }

  func testDefaultsNeverConnectIntoPrivateSpaceButANamedRuleDoes() throws {
    let origin = try startOrigin()
    defer { origin.stop() }
    proxy = try ProxyProcess(
      config: config(defaults: "{action: validate}"), listeners: ["forward"],
      wrapper: NetworkNamespace.wrapper(proxyNamespace))
    let named = try fetch("http://named.test/hello")
    XCTAssertTrue(named.hasPrefix("HTTP/1.1 200"), named)
    XCTAssertTrue(named.hasSuffix("hello from origin\n"), named)
    for (url, carried) in [
      ("http://internal.test/hello", "10.1.2.3 is in 10.0.0.0/8"),
      ("http://10.1.2.3/hello", "10.1.2.3 is in 10.0.0.0/8"),
      ("http://[2002:a01:203::1]/hello", "the IPv4 address 10.1.2.3 inside it"),
      ("http://[::ffff:10.1.2.3]/hello", "10.0.0.0/8"),
      ("http://169.254.169.254/latest/meta-data/", "the cloud metadata service"),
      ("http://100.64.1.1/", "100.64.0.0/10"),
      ("http://[fd00::1]/", "fc00::/7"),
    ] {
      let refused = try fetch(url)
      XCTAssertTrue(refused.hasPrefix("HTTP/1.1 403"), "\(url): \(refused)")
      XCTAssertTrue(refused.contains("Pinproxy-Error: denied-by-policy"), "\(url): \(refused)")
      // The range is named in the refusal's log line (the client's text is the summary).
      XCTAssertTrue(proxy!.child.wait(for: carried), "\(url): \(proxy!.log)")
    }
    // Refused before any connect: the origin saw only the named request.
    XCTAssertTrue(proxy!.child.wait(for: "host=named.test:443"), proxy!.log)
    let requests = try String(contentsOfFile: requestLog, encoding: .utf8)
    XCTAssertEqual(requests.split(separator: "\n").count, 1, requests)

    // defaults.allowedNetworks opens the range on purpose: the name is
    // dialled (and then judged as any defaults host: the system store does
    // not know this origin's root).
    try proxy!.rewrite(config: config(defaults: #"{action: validate, allowedNetworks: ["10.1.2.0/24"]}"#))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let opened = try fetch("http://internal.test/hello")
    XCTAssertTrue(opened.hasPrefix("HTTP/1.1 502"), opened)
    XCTAssertFalse(opened.contains("denied-by-policy"), opened)
    let check = try Subprocess.pinproxy(["check", "--config", proxy!.configFile])
    XCTAssertTrue(check.stderr.contains("warning: defaults.allowedNetworks opens 10.1.2.0/24"), check.stderr)
  }
}
