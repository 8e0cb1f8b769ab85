import Foundation
import PinTestSupport
import XCTest

/// Who may use a proxy listener: `allowedClients` here (checked at accept,
/// on 127.0.0.x, on IPv6 loopback and across a veth pair between network
/// namespaces); `proxyAuth` (HTTP Basic against an htpasswd file written by
/// Apache's own `htpasswd -B`) with real clients in `+Credentials`, under
/// attack in `+Attacks`; `pinproxy check` in `+Check`. One scenario per
/// test, the real binary, real sockets.
final class ProxyAccessTests: ProxyTestCase {
  var scratch: URL!

  override func setUpWithError() throws {
    scratch = FileManager.default.temporaryDirectory.appendingPathComponent("access-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
  }

  override func tearDown() {
    super.tearDown()
    try? FileManager.default.removeItem(at: scratch)
  }

  var port: Int { proxy!.ports["forward"]! }
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }
  var adminPort: Int { proxy!.ports["admin"]! }

  static let password = "Corr3ct-Horse-7731"

  func scratchPath(_ name: String) -> String { scratch.appendingPathComponent(name).path }

  /// An htpasswd file holding alice with `password` (bcrypt), written by
  /// the real tool.
  func htpasswd(_ name: String = "users", password: String = ProxyAccessTests.password) throws -> String {
    let path = scratchPath(name)
    try Htpasswd.write(path, [("alice", password)])
    return path
  }

  /// A forward listener named `forward` on 127.0.0.1 with `options`, an
  /// admin listener, httpbin.org allowed (its origin behind `connectTo`),
  /// everything else denied.
  func start(_ options: String, origin: Origin? = nil, verbose: Bool = true) throws {
    proxy = try ProxyProcess(
      config: try adminAndHttpbinOnly(listener: options, origin: origin), listeners: ["forward", "admin"],
      verbose: verbose)
  }

  func proxyAuth(_ htpasswd: String, _ extra: String = "") -> String {
    "proxyAuth: {htpasswd: \"\(htpasswd)\"\(extra)}"
  }

  /// curl's outcome when there may be no HTTP answer at all: exit status,
  /// `%{http_code} %{http_connect} %{http_version}`, stderr.
  func curlOutcome(_ arguments: [String]) throws -> (exit: Int32, codes: String, stderr: String) {
    let result = try Subprocess.run(
      "/usr/bin/curl",
      [
        "-s", "-S", "--max-time", "15", "-o", "/dev/null", "-w",
        "%{http_code} %{http_connect} %{http_version}",
      ] + arguments)
    return (result.status, result.stdout, result.stderr)
  }

  func metrics() throws -> String { try Curl.run(["http://127.0.0.1:\(adminPort)/metrics"]).text }

  /// The value of the sample `name{labels}` in the Prometheus text, or nil.
  func sample(_ text: String, _ series: String) -> Double? {
    text.split(separator: "\n").first { $0.hasPrefix(series + " ") }
      .flatMap { Double($0.split(separator: " ").last!) }
  }

  func logLines(_ event: String) -> [String] {
    proxy!.completeLogLines.filter { $0.contains(" \(event) ") }
  }

  // MARK: 1. allowedClients

  func testAllowedClientsServesTheListedAddressAndClosesOthersAtAccept() throws {
    try start(#"allowedClients: ["127.0.0.2/32"]"#)
    let allowed = try Curl.run([
      "--interface", "127.0.0.2", "-x", "http://127.0.0.1:\(port)", "http://httpbin.org/hello",
    ])
    XCTAssertEqual(allowed.status, 200, allowed.stderr + allowed.text)
    XCTAssertEqual(allowed.text, "hello from origin\n")

    for attempt in 1...2 {
      let refused = try curlOutcome([
        "--interface", "127.0.0.3", "-x", "http://127.0.0.1:\(port)", "http://httpbin.org/hello",
      ])
      XCTAssertNotEqual(refused.exit, 0, "attempt \(attempt) from 127.0.0.3 must fail: \(refused)")
      XCTAssertTrue(refused.codes.hasPrefix("000 "), "no HTTP status for 127.0.0.3: \(refused)")
    }
    XCTAssertEqual(
      origins[0].requests.filter { $0 == "GET /hello" }.count, 1, "only 127.0.0.2 reached the origin")
    // 127.0.0.1 is loopback but not in the list: the list replaces the default.
    let local = try curlOutcome(["-x", "http://127.0.0.1:\(port)", "http://httpbin.org/hello"])
    XCTAssertNotEqual(local.exit, 0, "127.0.0.1 is not in allowedClients: \(local)")

    let series = #"pinproxy_clients_refused_total{listener="forward",reason="address"}"#
    var text = ""
    XCTAssertTrue(
      try eventually {
        text = try metrics()
        return sample(text, series) == 3
      }, "three refusals counted (two from 127.0.0.3, one from 127.0.0.1):\n\(text)")
    let lines = logLines("client-refused")
    let from3 = lines.filter { $0.contains("client=127.0.0.3 ") }
    XCTAssertEqual(from3.count, 1, "logged once a minute per address:\n\(proxy!.log)")
    for field in ["warn client-refused ", "listener=forward", "code=client-not-allowed", "reason="] {
      XCTAssertTrue(from3.first?.contains(field) ?? false, "\(field) in \(from3)")
    }
    // All of loopback is one client (as for the connection limits): its
    // second address within the minute is counted, not logged again.
    XCTAssertEqual(lines.filter { $0.contains("client=127.0.0.1 ") }.count, 0, proxy!.log)
  }

  // MARK: 2. IPv6

  func testIPv6ListenerAllowsItsRulesAndRefusesAnIPv6ClientNotInThem() throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: v6, address: "[::1]:{port:v6}", mode: forward, allowedClients: ["::1/128"]}
          - {name: v4only, address: "[::1]:{port:v4only}", mode: forward, allowedClients: ["127.0.0.1/32"]}
        connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)"]
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        domains:
          - {domain: httpbin.org, anchors: [test]}
        """, listeners: ["v6", "v4only"])
    XCTAssertTrue(
      proxy!.child.wait(for: "address=[::1]:\(proxy!.ports["v6"]!) listener=v6"),
      "bound to ::1: \(proxy!.log)")
    let served = try Curl.run(["-x", "http://[::1]:\(proxy!.ports["v6"]!)", "http://httpbin.org/hello"])
    XCTAssertEqual(served.status, 200, served.stderr + served.text)
    XCTAssertEqual(served.text, "hello from origin\n")

    let refused = try curlOutcome([
      "-x", "http://[::1]:\(proxy!.ports["v4only"]!)", "http://httpbin.org/hello",
    ])
    XCTAssertNotEqual(refused.exit, 0, "::1 is not 127.0.0.1/32: \(refused)")
    XCTAssertTrue(refused.codes.hasPrefix("000 "), "\(refused)")
    XCTAssertTrue(proxy!.child.wait(for: "client-refused"), proxy!.log)
    let line = logLines("client-refused").first ?? ""
    XCTAssertTrue(line.contains("client=::1 "), line)
    XCTAssertTrue(line.contains("listener=v4only"), line)
    XCTAssertEqual(origin.requests.filter { $0 == "GET /hello" }.count, 1)
  }

  // MARK: 3. A listener off loopback, between network namespaces

  func testListenerOnANonLoopbackAddressAcrossNetworkNamespaces() throws {
    let suffix = String(UUID().uuidString.prefix(6)).lowercased()
    let proxyNS = "ppx-\(suffix)"
    let clientNS = "ppc-\(suffix)"
    let ip = "/usr/sbin/ip"
    func run(_ arguments: [String]) throws {
      let result = try Subprocess.run(ip, arguments)
      guard result.status == 0 else {
        throw HarnessError(
          "ip \(arguments.joined(separator: " ")) failed (\(result.status)): \(result.stderr)")
      }
    }
    guard FileManager.default.isExecutableFile(atPath: ip) else {
      throw HarnessError("\(ip) (iproute2) is required to create network namespaces")
    }
    try run(["netns", "add", proxyNS])
    addTeardownBlock { _ = try? Subprocess.run(ip, ["netns", "del", proxyNS]) }
    try run(["netns", "add", clientNS])
    addTeardownBlock { _ = try? Subprocess.run(ip, ["netns", "del", clientNS]) }
    try run(["link", "add", "vpx\(suffix)", "type", "veth", "peer", "name", "vpc\(suffix)"])
    addTeardownBlock { _ = try? Subprocess.run(ip, ["link", "del", "vpx\(suffix)"]) }
    try run(["link", "set", "vpx\(suffix)", "netns", proxyNS])
    try run(["link", "set", "vpc\(suffix)", "netns", clientNS])
    try run(["-n", proxyNS, "addr", "add", "192.0.2.1/24", "dev", "vpx\(suffix)"])
    try run(["-n", clientNS, "addr", "add", "192.0.2.2/24", "dev", "vpc\(suffix)"])
    try run(["-n", clientNS, "addr", "add", "192.0.2.3/24", "dev", "vpc\(suffix)"])
    for (namespace, device) in [(proxyNS, "vpx\(suffix)"), (clientNS, "vpc\(suffix)")] {
      try run(["-n", namespace, "link", "set", "lo", "up"])
      try run(["-n", namespace, "link", "set", device, "up"])
    }

    // Without rules, the configuration does not load.
    let open = scratchPath("open.yaml")
    try """
    listeners:
      - name: lan
        address: "192.0.2.1:3128"
        mode: forward
    defaults: {action: deny}
    """.write(toFile: open, atomically: true, encoding: .utf8)
    let check = try Subprocess.pinproxy(["check", "--config", open])
    XCTAssertEqual(check.status, 2, check.stderr)
    XCTAssertTrue(
      check.stderr.contains(
        "\(open):3:14: listeners[0].address: listener lan on 192.0.2.1:3128 would be an open proxy"),
      check.stderr)

    // With rules it runs in its namespace and serves only 192.0.2.2.
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: lan, address: "192.0.2.1:{port:lan}", mode: forward, allowedClients: ["192.0.2.2/32"]}
        defaults: {action: deny}
        domains: []
        """, listeners: ["lan"], wrapper: [ip, "netns", "exec", proxyNS])
    let lanPort = proxy!.ports["lan"]!
    func curlFrom(_ source: String) throws -> ProcessResult {
      try Subprocess.run(
        ip,
        [
          "netns", "exec", clientNS, "/usr/bin/curl", "-s", "-S", "--connect-timeout", "5", "--max-time",
          "10",
          "-D", "-", "-o", "/dev/null", "--interface", source, "-x", "http://192.0.2.1:\(lanPort)",
          "http://denied.example/",
        ])
    }
    let served = try curlFrom("192.0.2.2")
    XCTAssertEqual(served.status, 0, served.stderr)
    XCTAssertTrue(served.stdout.hasPrefix("HTTP/1.1 403 "), "the proxy answered 192.0.2.2: \(served.stdout)")
    XCTAssertTrue(served.stdout.contains("Pinproxy-Error: denied-by-policy"), served.stdout)
    XCTAssertTrue(proxy!.child.wait(for: "client=192.0.2.2:"), proxy!.log)

    let refused = try curlFrom("192.0.2.3")
    XCTAssertNotEqual(refused.status, 0, "192.0.2.3 must be refused at connect: \(refused.stdout)")
    XCTAssertFalse(refused.stdout.contains("HTTP/1.1"), "no HTTP answer for 192.0.2.3: \(refused.stdout)")
    XCTAssertTrue(proxy!.child.wait(for: "client-refused"), proxy!.log)
    let line = logLines("client-refused").first ?? ""
    XCTAssertTrue(line.contains("client=192.0.2.3 "), line)
    XCTAssertTrue(line.contains("listener=lan"), line)
  }

}
