import Foundation
import PinTestSupport
import XCTest

/// Local clients as who they are: real programs (curl, Python, Java) run as
/// other users by `setpriv` against the real binary, which learns each
/// loopback peer's user from the kernel (sock_diag) and its program from
/// `/proc`. One scenario per test.
final class LocalClientTests: ProxyTestCase {
  /// A uid no passwd entry names: shown as the number.
  static let stranger = "64123"
  /// Debian's `nobody`.
  static let nobody = "65534"

  var port: Int { proxy!.ports["forward"]! }
  var adminPort: Int { proxy!.ports["admin"]! }

  /// `command` run as `uid` (group the same, no supplementary groups).
  func asUser(_ uid: String, _ command: [String]) throws -> [String] {
    let setpriv = "/usr/bin/setpriv"
    guard FileManager.default.isExecutableFile(atPath: setpriv) else {
      throw HarnessError("\(setpriv) (util-linux) is required to run clients as other users")
    }
    guard getuid() == 0 else { throw HarnessError("running clients as other users needs root (setpriv)") }
    return [setpriv, "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--"] + command
  }

  func run(_ uid: String, _ command: [String]) throws -> ProcessResult {
    let full = try asUser(uid, command)
    return try Subprocess.run(full[0], Array(full.dropFirst()))
  }

  func start(listener options: String = "", host: String = "127.0.0.1", top: String = "") throws {
    proxy = try ProxyProcess(
      config: try adminAndHttpbinOnly(listener: options, host: host, top: top),
      listeners: ["forward", "admin"])
  }

  func curl(_ uid: String, _ url: String, proxyHost: String = "127.0.0.1") throws -> ProcessResult {
    try run(
      uid,
      [
        "/usr/bin/curl", "-s", "--max-time", "15", "-w", "\n%{http_code}", "-x",
        "http://\(proxyHost):\(port)", url,
      ])
  }

  func status() throws -> [String: Any] {
    let text = try Curl.run(["http://127.0.0.1:\(adminPort)/status"]).text
    return try XCTUnwrap(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], text)
  }

  func logLines(_ event: String) -> [String] { proxy!.completeLogLines.filter { $0.contains(" \(event) ") } }

  /// `allowedUsers: [nobody]`: nobody's curl is served and its access line
  /// names user and program; another user's curl is closed at connect, before
  /// any byte is read, and that is logged once with its uid and counted.
  func testAListedUserIsServedAndAnotherIsClosedAtConnect() throws {
    try start(listener: "allowedUsers: [nobody]")
    let served = try curl(Self.nobody, "http://httpbin.org/hello")
    XCTAssertEqual(served.stdout, "hello from origin\n\n200", served.stderr)
    for _ in 0..<2 {
      let refused = try curl(Self.stranger, "http://httpbin.org/hello")
      XCTAssertNotEqual(refused.status, 0)
      XCTAssertTrue(refused.stdout.hasSuffix("000"), refused.stdout)
    }
    XCTAssertTrue(
      try eventually(timeout: 5) {
        let lines = self.logLines("client-refused")
        return lines.count == 1 && lines[0].contains("client_user=\(Self.stranger)")
          && lines[0].contains("client_program=curl") && lines[0].contains("allowedUsers")
      }, proxy!.log)
    XCTAssertTrue(proxy!.waitForLine { $0.contains(" request ") }, proxy!.log)
    let access = try XCTUnwrap(logLines("request").first, proxy!.log)
    XCTAssertTrue(access.contains("client_user=nobody") && access.contains("client_program=curl"), access)
    let metrics = try Curl.run(["http://127.0.0.1:\(adminPort)/metrics"]).text
    XCTAssertTrue(
      metrics.contains(#"pinproxy_clients_refused_total{listener="forward",reason="user"} 2"#), metrics)
  }

  /// A refusal names the local user and program in the `refused` line, on
  /// the operator's page and in `/status` (Python as nobody, Java as a uid
  /// without a name); `/status` lists them among the local programs. Python
  /// closes the moment it has read its 403: the answer waits for the lookup.
  func testRefusalsNameTheUserAndProgramEverywhere() throws {
    try start()
    let python = try run(
      Self.nobody,
      [
        "/usr/bin/python3", "-c",
        """
        import urllib.request, urllib.error
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://127.0.0.1:\(port)"}))
        try:
            opener.open("http://denied.example/", timeout=10)
        except urllib.error.HTTPError as error:
            print(error.code)
        """,
      ])
    XCTAssertEqual(python.stdout, "403\n", python.stderr)
    let source = FileManager.default.temporaryDirectory.appendingPathComponent(
      "ProxyGet-\(UUID().uuidString).java")
    try Self.javaClient.write(to: source, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: source) }
    chmod(source.path, 0o644)
    let java = try run(
      Self.stranger,
      ["/usr/bin/java", "-Duser.home=/tmp", source.path, String(port), "http://httpbin.org/hello"])
    XCTAssertEqual(java.stdout, "200 hello from origin\n", java.stderr)
    XCTAssertTrue(
      try eventually(timeout: 5) {
        self.logLines("refused").contains {
          $0.contains("client_user=nobody") && $0.contains("client_program=python3")
        }
      }, proxy!.log)
    XCTAssertTrue(
      logLines("request").contains {
        $0.contains("client_user=\(Self.stranger)") && $0.contains("client_program=java")
      },
      proxy!.log)
    let status = try status()
    let refusal = try XCTUnwrap((status["refusals"] as? [[String: Any]])?.first)
    XCTAssertEqual(refusal["clientUser"] as? String, "nobody")
    XCTAssertTrue((refusal["clientProgram"] as? String ?? "").hasPrefix("python3"), "\(refusal)")
    let programs = try XCTUnwrap(status["localPrograms"] as? [[String: Any]], "\(status)")
    XCTAssertTrue(
      programs.contains {
        ($0["program"] as? String ?? "").hasPrefix("python3") && $0["refusals"] as? Int == 1
      },
      "\(programs)")
    XCTAssertTrue(
      programs.contains { $0["program"] as? String == "java" && $0["user"] as? String == Self.stranger },
      "\(programs)")
    let page = try Curl.run(["http://127.0.0.1:\(adminPort)/"]).text
    XCTAssertTrue(page.contains(#"<code class="client-user">nobody</code>"#), page)
    XCTAssertTrue(page.contains(#"<code class="client-program">python3"#), page)
    let screen = try Subprocess.pinproxy(["status", "--admin", "127.0.0.1:\(adminPort)"])
    XCTAssertTrue(screen.stdout.contains("user nobody program python3"), screen.stdout)
    XCTAssertTrue(screen.stdout.contains("LOCAL PROGRAMS"), screen.stdout)
  }

  /// Java's HttpClient through the proxy on 127.0.0.1:PORT: prints the
  /// status and the body.
  static let javaClient = """
    import java.net.*;
    import java.net.http.*;

    public class ProxyGet {
      public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newBuilder()
          .proxy(ProxySelector.of(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])))).build();
        HttpResponse<String> response = client.send(
          HttpRequest.newBuilder(URI.create(args[1])).build(), HttpResponse.BodyHandlers.ofString());
        System.out.print(response.statusCode() + " " + response.body());
      }
    }
    """

  /// An IPv6 loopback client is known by its user as well.
  func testAnIPv6LoopbackClientIsKnownByItsUser() throws {
    try start(listener: "allowedUsers: [nobody]", host: "[::1]")
    let served = try curl(Self.nobody, "http://httpbin.org/hello", proxyHost: "[::1]")
    XCTAssertEqual(served.stdout, "hello from origin\n\n200", served.stderr)
    XCTAssertTrue(
      try curl(Self.stranger, "http://httpbin.org/hello", proxyHost: "[::1]").stdout.hasSuffix("000"))
    XCTAssertTrue(proxy!.waitForLine { $0.contains(" request ") }, proxy!.log)
    let access = try XCTUnwrap(logLines("request").first, proxy!.log)
    XCTAssertTrue(access.contains("client=[::1]:") && access.contains("client_user=nobody"), access)
  }

  /// Two users each running a burst of slow h2 streams through one
  /// connection: each gets its own per-client share of upstream sockets
  /// (4 with `maxConnectionsPerClient: 4`), where sharing one key (as
  /// 127.0.0.1) would leave the second one socket.
  func testTwoUsersEachKeepTheirOwnShareOfTheUpstreamBudget() throws {
    try start(top: "limits: {maxConnectionsPerClient: 4}")
    let ca = FileManager.default.temporaryDirectory.appendingPathComponent(
      "local-ca-\(UUID().uuidString).pem"
    ).path
    try FileManager.default.copyItem(
      atPath: proxy!.directory.appendingPathComponent("state/ca.pem").path, toPath: ca)
    defer { try? FileManager.default.removeItem(atPath: ca) }
    chmod(ca, 0o644)
    func burst(_ uid: String) throws -> BackgroundCommand {
      let urls = (0..<8).flatMap { _ in ["-o", "/dev/null", "https://httpbin.org/slow/4"] }
      let command = try asUser(
        uid,
        [
          "/usr/bin/curl", "-s", "--http2", "--parallel", "--parallel-max", "8", "--max-time", "20",
          "--cacert", ca,
          "-x", "http://127.0.0.1:\(port)", "-w", "%{http_code}\n",
        ] + urls)
      return try BackgroundCommand(command[0], Array(command.dropFirst()))
    }
    func sockets() throws -> Double? {
      let text = try Curl.run(["http://127.0.0.1:\(adminPort)/metrics"]).text
      return text.split(separator: "\n").first { $0.hasPrefix("pinproxy_upstream_sockets_open ") }
        .flatMap { Double($0.split(separator: " ").last!) }
    }
    let first = try burst(Self.nobody)
    defer { first.terminate() }
    XCTAssertTrue(try eventually(timeout: 8) { try sockets() == 4 }, "nobody holds its 4")
    let second = try burst(Self.stranger)
    defer { second.terminate() }
    XCTAssertTrue(
      try eventually(timeout: 8) { try sockets() == 8 }, "the second user holds 4 more")
    let (firstExit, firstCodes) = first.finish()
    let (secondExit, secondCodes) = second.finish()
    XCTAssertEqual(firstExit, 0)
    XCTAssertEqual(secondExit, 0)
    XCTAssertEqual(firstCodes.split(separator: "\n").filter { $0 == "200" }.count, 4, firstCodes)
    XCTAssertEqual(secondCodes.split(separator: "\n").filter { $0 == "200" }.count, 4, secondCodes)
  }

  /// Connections reset before the proxy could ask who owns them: such a
  /// peer is unknown (never another user), nothing crashes, and a listed
  /// user is served right after.
  func testClientsGoneBeforeTheLookupAreUnknownAndNothingBreaks() throws {
    try start(listener: "allowedUsers: [nobody, \(Self.stranger)]")
    let reset = try run(
      Self.nobody,
      [
        "/usr/bin/python3", "-c",
        """
        import socket, struct
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", \(port)))
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.close()
        print("done")
        """,
      ])
    XCTAssertEqual(reset.stdout, "done\n", reset.stderr)
    let served = try curl(Self.stranger, "http://httpbin.org/hello")
    XCTAssertEqual(served.stdout, "hello from origin\n\n200", served.stderr)
    // Refusals of the gone ones, if any were logged, name no user but "unknown".
    for line in logLines("client-refused") { XCTAssertTrue(line.contains("client_user=unknown"), line) }
  }

  /// `check`: an unknown user name is an error at its line and key; on a
  /// listener off loopback, allowedUsers alone is refused and with
  /// allowedClients it loads with a warning.
  func testCheckResolvesUserNamesAndWarnsOffLoopback() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "users-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    func check(_ listener: String) throws -> ProcessResult {
      let path = directory.appendingPathComponent("p.yaml").path
      try "listeners:\n  - \(listener)\n".write(toFile: path, atomically: true, encoding: .utf8)
      return try Subprocess.pinproxy(["check", "--config", path])
    }
    let unknown = try check(
      #"{name: f, address: "127.0.0.1:3128", allowedUsers: [nobody, no-such-user-here]}"#)
    XCTAssertEqual(unknown.status, 2)
    XCTAssertTrue(
      unknown.stderr.contains(":2:") && unknown.stderr.contains("listeners[0].allowedUsers[1]")
        && unknown.stderr.contains("no user \"no-such-user-here\""), unknown.stderr)
    let alone = try check(#"{name: f, address: "192.0.2.1:3128", allowedUsers: [nobody]}"#)
    XCTAssertEqual(alone.status, 2)
    XCTAssertTrue(alone.stderr.contains("peers from other hosts have no local user"), alone.stderr)
    let withClients = try check(
      #"{name: f, address: "192.0.2.1:3128", allowedUsers: ["65534"], allowedClients: ["192.0.2.0/24"]}"#)
    XCTAssertEqual(withClients.status, 0, withClients.stderr)
    XCTAssertTrue(
      withClients.stderr.contains("allowedUsers restricts only clients on this host"), withClients.stderr)
  }
}
