import Foundation
import PinTestSupport
import XCTest

/// A `mode: socks5` listener driven by real clients: curl (`socks5h://`,
/// with and without credentials) and Python's PySocks; a raw client for
/// the commands it does not support. The tunnel is the forward listener's
/// CONNECT: intercepted under the local CA, refused with a SOCKS reply code.
final class SocksTests: ProxyTestCase {
  var port: Int { proxy!.ports["socks"]! }
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }
  static let password = "Corr3ct-Horse-7731"

  func start(_ options: String = "") throws {
    proxy = try ProxyProcess(
      config: try httpbinOnly(
        listeners: "  - {name: socks, address: \"127.0.0.1:{port:socks}\", mode: socks5\(options)}"),
      listeners: ["socks"])
  }

  func curl(_ proxyURL: String, _ url: String) throws -> ProcessResult {
    try Subprocess.run(
      "/usr/bin/curl", ["-s", "-S", "--max-time", "15", "--cacert", caPath, "-x", proxyURL, url])
  }

  /// curl resolves nothing itself (socks5h): the name reaches pinproxy,
  /// which intercepts under its local CA and applies httpbin.org's rule.
  func testCurlThroughSocks5hIsInterceptedUnderTheLocalCA() throws {
    try start()
    let result = try curl("socks5h://127.0.0.1:\(port)", "https://httpbin.org/hello")
    XCTAssertEqual(result.stdout, "hello from origin\n", result.stderr)
    XCTAssertTrue(
      proxy!.waitForLine { $0.contains(" request ") && $0.contains("host=httpbin.org:443") }, proxy!.log)
  }

  /// A host the policy denies gets reply 0x02 (not allowed by ruleset)
  /// and a `refused` line with its code; nothing reaches an upstream.
  func testADeniedHostGetsNotAllowedByRuleset() throws {
    try start()
    let result = try curl("socks5h://127.0.0.1:\(port)", "https://denied.example/")
    XCTAssertNotEqual(result.status, 0)
    XCTAssertTrue(
      result.stderr.contains("(2)") || result.stderr.lowercased().contains("not allowed"), result.stderr)
    XCTAssertTrue(
      proxy!.waitForLine { $0.contains(" refused ") && $0.contains("code=denied-by-policy") }, proxy!.log)
  }

  /// With proxyAuth: the right password over RFC 1929 is served, a wrong
  /// one is rejected at the sub-negotiation, no credential at all is
  /// refused at the greeting.
  func testCredentialsAreCheckedAgainstTheHtpasswdFile() throws {
    let htpasswd = FileManager.default.temporaryDirectory.appendingPathComponent("socks-\(UUID().uuidString)")
      .path
    try Htpasswd.write(htpasswd, [("alice", Self.password)])
    defer { try? FileManager.default.removeItem(atPath: htpasswd) }
    try start(", proxyAuth: {htpasswd: \"\(htpasswd)\"}")
    let served = try curl("socks5h://alice:\(Self.password)@127.0.0.1:\(port)", "https://httpbin.org/hello")
    XCTAssertEqual(served.stdout, "hello from origin\n", served.stderr)
    let wrong = try curl("socks5h://alice:wrong-one@127.0.0.1:\(port)", "https://httpbin.org/hello")
    XCTAssertNotEqual(wrong.status, 0)
    XCTAssertTrue(
      wrong.stderr.lowercased().contains("rejected") || wrong.stderr.contains("authentication"), wrong.stderr)
    let none = try curl("socks5h://127.0.0.1:\(port)", "https://httpbin.org/hello")
    XCTAssertNotEqual(none.status, 0, none.stdout)
    XCTAssertTrue(proxy!.waitForLine { $0.contains("socks-refused") }, proxy!.log)
  }

  /// Python's PySocks (Debian's python3-socks), the name resolved remotely,
  /// TLS checked against the local CA by Python's ssl module.
  func testPythonPySocksClient() throws {
    try start()
    let script = """
      import socks, ssl, sys
      s = socks.socksocket()
      s.set_proxy(socks.SOCKS5, "127.0.0.1", int(sys.argv[1]), rdns=True)
      s.settimeout(15)
      s.connect(("httpbin.org", 443))
      tls = ssl.create_default_context(cafile=sys.argv[2]).wrap_socket(s, server_hostname="httpbin.org")
      tls.sendall(b"GET /hello HTTP/1.1\\r\\nHost: httpbin.org\\r\\nConnection: close\\r\\n\\r\\n")
      data = b""
      while True:
          chunk = tls.recv(4096)
          if not chunk:
              break
          data += chunk
      print(data.split(b"\\r\\n", 1)[0].decode(), data.endswith(b"hello from origin\\n"))
      """
    let probe = try Subprocess.run("/usr/bin/python3", ["-c", "import socks"])
    guard probe.status == 0 else {
      throw HarnessError("python3-socks (PySocks) is required (scripts/install-deps.sh installs it)")
    }
    let result = try Subprocess.run("/usr/bin/python3", ["-c", script, String(port), caPath])
    XCTAssertEqual(result.stdout, "HTTP/1.1 200 OK True\n", result.stderr)
  }

  /// A client that does not wait for replies: greeting, CONNECT and its
  /// first request in one write. What followed the CONNECT request is the
  /// tunnel's first bytes (here plain HTTP, served as an http:// request
  /// to the CONNECT host and upgraded to TLS), never lost or parsed as
  /// SOCKS.
  func testBytesSentAheadOfTheRepliesAreTheTunnelsFirstBytes() throws {
    try start()
    let script = """
      import socket, sys
      s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
      s.sendall(bytes([5, 1, 0]) + bytes([5, 1, 0, 3, 11]) + b"httpbin.org" + bytes([1, 187])
                + b"GET /hello HTTP/1.1\\r\\nHost: httpbin.org\\r\\nConnection: close\\r\\n\\r\\n")
      data = s.makefile("rb").read()
      print(data[:2].hex(), data[2:4].hex(), data[12:].split(b"\\r\\n")[0].decode(), repr(data.split(b"\\r\\n\\r\\n", 1)[-1]))
      """
    let result = try Subprocess.run("/usr/bin/python3", ["-c", script, String(port)])
    XCTAssertEqual(result.stdout, "0500 0500 HTTP/1.1 200 OK b'hello from origin\\n'\n", result.stderr)
    XCTAssertTrue(
      proxy!.waitForLine { $0.contains(" request ") && $0.contains("host=httpbin.org:443") }, proxy!.log)
  }

  /// BIND and UDP ASSOCIATE get 0x07 (command not supported); an IPv4
  /// destination the policy does not name gets 0x02; an unknown address
  /// type 0x08. A raw client, byte for byte.
  func testUnsupportedCommandsAndAddressTypesGetTheirReplyCodes() throws {
    try start()
    let script = """
      import socket, sys
      def ask(request):
          s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
          s.sendall(bytes([5, 1, 0]))
          assert s.recv(2) == bytes([5, 0])
          s.sendall(request)
          reply = s.recv(10)
          s.close()
          return reply[1] if len(reply) >= 2 else -1
      print(ask(bytes([5, 2, 0, 3, 11]) + b"httpbin.org" + bytes([1, 187])),
            ask(bytes([5, 3, 0, 1, 0, 0, 0, 0, 0, 0])),
            ask(bytes([5, 1, 0, 1, 192, 0, 2, 1, 1, 187])),
            ask(bytes([5, 1, 0, 9, 1, 2])))
      """
    let result = try Subprocess.run("/usr/bin/python3", ["-c", script, String(port)])
    XCTAssertEqual(result.stdout, "7 7 2 8\n", result.stderr)
  }
}
