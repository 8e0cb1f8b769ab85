import Foundation
import PinTestSupport
import XCTest

/// Proxy authentication and the upstream budget against a hostile client:
/// filling the throttle's table from thousands of source addresses,
/// draining a shared loopback bucket, timing failed checks, and holding an
/// address's upstream sockets. Real binary, real sockets.
extension ProxyAccessTests {
  /// A network namespace whose loopback answers for all of 198.18.0.0/16
  /// (an AnyIP `local` route), so one process can connect from 4,096
  /// source addresses; removed after the test.
  func namespaceWithRoutedBlock() throws -> String {
    try NetworkNamespace.withRoutedBlock(for: self)
  }

  /// One request from each of `count` source addresses in 198.18.1.0
  /// onwards, with `mode`'s Proxy-Authorization; the count of each status.
  static let flood = """
    import base64, collections, concurrent.futures, socket, sys
    port, mode, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    def one(i):
        s = socket.socket()
        s.settimeout(30)
        s.bind(("198.18.%d.%d" % (i >> 8, i & 255), 0))
        s.connect(("198.18.255.254", port))
        credential = b"!!!" if mode == "malformed" else base64.b64encode(b"alice:wrong-%d" % i)
        s.sendall(b"GET http://denied.example/ HTTP/1.1\\r\\nHost: denied.example\\r\\n"
                  b"Proxy-Authorization: Basic " + credential + b"\\r\\nConnection: close\\r\\n\\r\\n")
        data = b""
        while b"\\r\\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        s.close()
        return data.split(b" ")[1].decode() if data.startswith(b"HTTP/") else "none"
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        counts = collections.Counter(pool.map(one, range(256, 256 + count)))
    print(" ".join("%s=%d" % item for item in sorted(counts.items())))
    """

  /// 4,096 source addresses each send one malformed credential, then one
  /// wrong password each: the throttle's table is full, yet a newcomer with
  /// the right password is served and only a client actually in debt is
  /// refused.
  func testFourThousandSourceAddressesLockOutNoNewcomer() throws {
    let namespace = try namespaceWithRoutedBlock()
    let ip = "/usr/sbin/ip"
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "198.18.255.254:{port:forward}", mode: forward, allowedClients: ["198.18.0.0/16"], \(proxyAuth(try htpasswd()))}
        defaults: {action: deny}
        domains: []
        """, listeners: ["forward"], verbose: false, wrapper: [ip, "netns", "exec", namespace])
    func inNamespace(_ arguments: [String]) throws -> ProcessResult {
      try Subprocess.run(ip, ["netns", "exec", namespace] + arguments)
    }
    func curl(from source: String, _ password: String) throws -> String {
      try inNamespace([
        "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "--interface",
        source,
        "-x", "http://198.18.255.254:\(port)", "--proxy-user", "alice:\(password)", "http://denied.example/",
      ]).stdout
    }
    // Verified before the flood, from an address of its own.
    XCTAssertEqual(try curl(from: "198.18.250.1", Self.password), "403", "served past authentication")
    for mode in ["malformed", "wrong"] {
      let flood = try inNamespace(["/usr/bin/env", "python3", "-c", Self.flood, String(port), mode, "4096"])
      XCTAssertEqual(flood.stdout.trimmingCharacters(in: .whitespacesAndNewlines), "407=4096", flood.stderr)
      // A newcomer, and the client verified before: neither owes anything.
      XCTAssertEqual(try curl(from: "198.18.251.\(mode.count)", Self.password), "403", "\(mode): newcomer")
      XCTAssertEqual(try curl(from: "198.18.250.1", Self.password), "403", "\(mode): verified client")
    }
    // The throttle still works: one address guessing gets 429 after its burst.
    let guesses = try (1...12).map { try curl(from: "198.18.252.1", "guess-\($0)") }
    XCTAssertEqual(guesses.prefix(10).filter { $0 == "407" }.count, 10, "\(guesses)")
    XCTAssertEqual(guesses.last, "429", "\(guesses)")
  }

  /// One loopback process sends malformed fields and wrong passwords; a
  /// client on 127.0.0.9 whose password was verified is never refused,
  /// although all of 127/8 shares one bucket.
  func testAnotherLoopbackClientsDebtNeverRefusesAVerifiedPassword() throws {
    try start(proxyAuth(try htpasswd()))
    let url = "http://httpbin.org/hello"
    let right = ["--interface", "127.0.0.9", "--proxy-user", "alice:\(Self.password)"]
    XCTAssertEqual(try get(url, through: port, right).status, 200)
    for attempt in 1...30 {
      let malformed = try get(url, through: port, ["-H", "Proxy-Authorization: Basic !!!-\(attempt)"])
      XCTAssertEqual(malformed.status, 407, "malformed field \(attempt) costs nothing: \(malformed.text)")
    }
    for attempt in 1...12 {
      _ = try get(url, through: port, ["--proxy-user", "alice:guess-\(attempt)"])
    }
    let throttled = try get(url, through: port, ["--proxy-user", "alice:guess-13"])
    XCTAssertEqual(throttled.status, 429, "the shared bucket is spent: \(throttled.text)")
    for attempt in 1...12 {
      let served = try get(url, through: port, right)
      XCTAssertEqual(served.status, 200, "verified request \(attempt): \(served.text)")
    }
  }

  func testCheckWarnsWhenAnHtpasswdFileMixesBcryptCosts() throws {
    let users = scratchPath("mixed")
    try Htpasswd.write(users, [("alice", Self.password)])
    let bob = try Subprocess.run(Htpasswd.tool, ["-B", "-C", "7", "-b", users, "bob", "other-pass"])
    XCTAssertEqual(bob.status, 0, bob.stderr)
    let config = scratchPath("mixed.yaml")
    try """
    listeners:
      - name: forward
        address: 127.0.0.1:3128
        mode: forward
        proxyAuth: {htpasswd: "\(users)"}
    defaults: {action: deny}
    """.write(toFile: config, atomically: true, encoding: .utf8)
    let check = try Subprocess.pinproxy(["check", "--config", config])
    XCTAssertEqual(check.status, 0, check.stderr)
    XCTAssertTrue(check.stderr.contains("\(config):5:"), check.stderr)
    XCTAssertTrue(check.stderr.contains("warning: \(users) mixes bcrypt costs 5, 7"), check.stderr)
  }

  /// Sixteen slow exchanges from 127.0.0.1 take the address's upstream
  /// cap (`ulimit -n 256`: 64 sockets in all, 16 per address); a new
  /// connection from another program on the host is still served, since
  /// it holds no upstream socket and the total has room.
  func testAConnectionHoldingNoUpstreamSocketIsServedWhileItsAddressIsAtItsCap() throws {
    let origin = try self.origin()
    proxy = try ProxyProcess(
      config: httpbinConfig(origin, top: #"admin: {address: "127.0.0.1:{port:admin}"}"#),
      listeners: ["forward", "admin"], wrapper: ["/usr/bin/prlimit", "--nofile=256:256", "--"])
    let slow = try (0..<16).map { _ in
      try BackgroundCommand(
        "/usr/bin/curl",
        [
          "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", "-x", "http://127.0.0.1:\(port)",
          "http://httpbin.org/slow/10",
        ])
    }
    defer { slow.forEach { $0.terminate() } }
    XCTAssertTrue(
      try eventually(timeout: 8) {
        sample(try metrics(), "pinproxy_upstream_sockets_open") == 16
      }, "16 upstream sockets held")
    let newcomer = try get("http://httpbin.org/hello", through: port)
    XCTAssertEqual(newcomer.status, 200, newcomer.text)
    XCTAssertEqual(newcomer.text, "hello from origin\n")
    for command in slow { XCTAssertEqual(command.finish().1, "200") }
  }

  /// A dual-stack listener sees 127.0.0.1 as ::ffff:127.0.0.1; the refusal
  /// line prints it so (RFC 5952 §5), not as ::ffff:7f00:1.
  func testAnIPv4MappedPeerIsLoggedInDottedForm() throws {
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: dual, address: "[::]:{port:dual}", mode: forward, allowedClients: ["::1/128"]}
        defaults: {action: deny}
        domains: []
        """, listeners: ["dual"])
    let refused = try Subprocess.run(
      "/usr/bin/curl",
      ["-s", "--max-time", "5", "-x", "http://127.0.0.1:\(proxy!.ports["dual"]!)", "http://denied.example/"])
    XCTAssertNotEqual(refused.status, 0, "closed at accept: \(refused.stdout)")
    XCTAssertTrue(proxy!.child.wait(for: "client-refused"), proxy!.log)
    let line = logLines("client-refused").first ?? ""
    XCTAssertTrue(line.contains("client=::ffff:127.0.0.1 "), line)
  }

  /// Without `admin.tokenFile`, only a loopback client may reload: an
  /// allowed client on another address reads the views but gets 403 for
  /// `POST /reload` (a reload changes what the proxy does).
  func testAReloadFromAnotherAddressNeedsTheToken() throws {
    let namespace = try namespaceWithRoutedBlock()
    let ip = "/usr/sbin/ip"
    proxy = try ProxyProcess(
      config: """
        admin: {address: "198.18.255.254:{port:admin}", allowedClients: ["198.18.0.0/16"]}
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
        defaults: {action: deny}
        domains: []
        """, listeners: ["forward", "admin"], wrapper: [ip, "netns", "exec", namespace])
    let url = "http://198.18.255.254:\(proxy!.ports["admin"]!)"
    func curl(_ arguments: [String]) throws -> ProcessResult {
      try Subprocess.run(
        ip,
        ["netns", "exec", namespace, "/usr/bin/curl", "-s", "--max-time", "10", "--interface", "198.18.7.7"]
          + arguments)
    }
    let views = try curl(["-o", "/dev/null", "-w", "%{http_code}", url + "/healthz"])
    XCTAssertEqual(views.stdout, "200", "an allowed client reads the views")
    let reload = try curl(["-X", "POST", "-w", " %{http_code}", url + "/reload"])
    XCTAssertEqual(reload.stdout, "a reload from another address needs the admin token\n 403", reload.stderr)
    XCTAssertFalse(proxy!.log.contains("reload-ok"), proxy!.log)
  }
}
