import Foundation
import PinTestSupport
import XCTest

/// Every client gets through, and every refusal reaches the person: the
/// clients people run (curl, Python's urllib and requests, Java's
/// HttpClient, openssl s_client, headless Chromium) against the real binary
/// and real TLS origins. One scenario per test.
final class ClientReachTests: ProxyTestCase {
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }
  var port: Int { proxy!.ports["forward"]! }

  /// An intercepting forward listener: httpbin.org is allowed,
  /// pinned.httpbin.org is pinned to a key the origin does not have.
  func start(
    origin: Origin, listenerOptions: String = "", lingering: String = "timeouts: {lingeringClose: 30s}"
  )
    throws
  {
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward\(listenerOptions)}
      connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)", "pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      defaults: {action: deny}
      \(lingering)
      domains:
        - {domain: httpbin.org, anchors: [test]}
        - domain: pinned.httpbin.org
          anchors: [test]
          pinningMode: publicKey
          pinnedPublicKeyHashes: ["\(Fixtures.certificate("adn.pem").spkiPin)"]
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
  }

  /// A 10 MB file to upload.
  func bigFile() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("upload-\(UUID().uuidString)")
      .path
    FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x61, count: 10 * 1024 * 1024))
    addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
  }

  // MARK: 1. A refused upload still gets its answer (lingering close)

  func testRefusedTenMegabyteUploadGetsThe502WithCurl() throws {
    try start(origin: try origin())
    let file = try bigFile()
    for url in ["https://pinned.httpbin.org/upload", "http://pinned.httpbin.org/upload"] {
      let result = try Curl.run([
        "-x", "http://127.0.0.1:\(port)", "--cacert", caPath, "--data-binary", "@\(file)", url,
      ])
      XCTAssertEqual(result.status, 502, "\(url): \(result.stderr)")
      XCTAssertEqual(result.pinproxyError, "pin-mismatch", url)
    }
  }

  func testRefusedTenMegabyteUploadGetsThe502WithWget() throws {
    try start(origin: try origin())
    let file = try bigFile()
    for url in ["https://pinned.httpbin.org/upload", "http://pinned.httpbin.org/upload"] {
      // wget exits 8 on an error status; -S prints the response head on stderr.
      let result = try Subprocess.run(
        "/usr/bin/env",
        [
          "wget", "-S", "-O", "/dev/null", "--tries=1", "--timeout=30", "--ca-certificate=\(caPath)",
          "--post-file=\(file)", url,
        ],
        environment: ["https_proxy": "http://127.0.0.1:\(port)", "http_proxy": "http://127.0.0.1:\(port)"])
      XCTAssertTrue(result.stderr.contains("HTTP/1.1 502 Bad Gateway"), "\(url): \(result.stderr)")
      XCTAssertTrue(result.stderr.contains("Pinproxy-Error: pin-mismatch"), "\(url): \(result.stderr)")
    }
  }

  func testRefusedTenMegabyteUploadGetsThe502WithPythonUrllibAndRequests() throws {
    try start(origin: try origin())
    let script = """
      import ssl, sys, urllib.request, urllib.error, requests
      body = b"a" * (10 * 1024 * 1024)
      proxy = "http://127.0.0.1:\(port)"
      context = ssl.create_default_context(cafile="\(caPath)")
      opener = urllib.request.build_opener(
          urllib.request.ProxyHandler({"https": proxy, "http": proxy}), urllib.request.HTTPSHandler(context=context))
      for url in ["https://pinned.httpbin.org/upload", "http://pinned.httpbin.org/upload"]:
          try:
              opener.open(urllib.request.Request(url, data=body, method="POST"), timeout=30)
              print("urllib", url, "no error")
          except urllib.error.HTTPError as error:
              print("urllib", url, error.code, error.headers["Pinproxy-Error"])
          response = requests.post(url, data=body, proxies={"https": proxy, "http": proxy}, verify="\(caPath)", timeout=30)
          print("requests", url, response.status_code, response.headers.get("Pinproxy-Error"))
      """
    let result = try Subprocess.run("/usr/bin/env", ["python3", "-c", script])
    XCTAssertEqual(
      result.stdout,
      """
      urllib https://pinned.httpbin.org/upload 502 pin-mismatch
      requests https://pinned.httpbin.org/upload 502 pin-mismatch
      urllib http://pinned.httpbin.org/upload 502 pin-mismatch
      requests http://pinned.httpbin.org/upload 502 pin-mismatch

      """, result.stderr)
  }

  func testRefusedTenMegabyteUploadGetsThe502WithJavaHttpClient() throws {
    try start(origin: try origin())
    let output = try Java.run(
      """
      import java.net.*; import java.net.http.*; import java.security.*; import java.security.cert.*;
      import javax.net.ssl.*; import java.io.*;
      public class Upload {
        \(Java.trustingMethod)
        public static void main(String[] args) throws Exception {
          SSLContext tls = trusting(args[1]);
          HttpClient client = HttpClient.newBuilder().sslContext(tls).version(HttpClient.Version.HTTP_1_1)
              .proxy(ProxySelector.of(new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])))).build();
          byte[] body = new byte[10 * 1024 * 1024];
          for (String url : new String[] {"https://pinned.httpbin.org/upload", "https://httpbin.org/hello"}) {
            HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url));
            if (url.endsWith("upload")) request.POST(HttpRequest.BodyPublishers.ofByteArray(body));
            HttpResponse<String> response = client.send(request.build(), HttpResponse.BodyHandlers.ofString());
            System.out.println(url + " " + response.statusCode() + " "
                + response.headers().firstValue("Pinproxy-Error").orElse("-"));
          }
        }
      }
      """, arguments: [String(port), caPath])
    XCTAssertEqual(
      output,
      "https://pinned.httpbin.org/upload 502 pin-mismatch\nhttps://httpbin.org/hello 200 -\n")
  }

  /// A client that keeps sending and never reads cannot hold a refused
  /// connection open: the time bound and the byte bound each end it.
  func testLingeringIsBoundedInTimeAndInBytes() throws {
    let script = """
      import socket, sys, time
      sock = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
      sock.sendall(b"POST http://pinned.httpbin.org/upload HTTP/1.1\\r\\nHost: pinned.httpbin.org\\r\\n"
                   b"Content-Length: 1000000000\\r\\n\\r\\n")
      # 64 KiB every 10 ms: about 6 MB/s, slow enough that only the time
      # bound can end the first case, fast enough to pass 1 MiB in the second.
      started, chunk = time.time(), b"a" * 65536
      sock.settimeout(1)
      try:
          while time.time() - started < 20:
              sock.send(chunk)
              time.sleep(0.01)
          print("still open")
      except OSError:
          print("closed after %.1f s" % (time.time() - started))
      """
    for (lingering, bound, atLeast) in [
      ("timeouts: {lingeringClose: 3s}\nlimits: {lingeringCloseBytes: 17179869184}", "time", 2.0),
      ("limits: {lingeringCloseBytes: 1048576}", "bytes", 0.0),
    ] {
      proxy = nil
      try start(origin: try origin(), lingering: lingering)
      let result = try Subprocess.run("/usr/bin/env", ["python3", "-c", script, String(port)])
      let seconds = Double(result.stdout.split(separator: " ").dropFirst(2).first ?? "") ?? 99
      XCTAssertTrue(result.stdout.hasPrefix("closed after"), "\(bound): \(result.stdout) \(result.stderr)")
      XCTAssertLessThan(seconds, 10, "\(bound) bound: \(result.stdout)")
      XCTAssertGreaterThanOrEqual(seconds, atLeast, "\(bound) bound: \(result.stdout)")
    }
  }

  // MARK: 2. Legacy clients that can only use RSA, and clients that only use ECDSA

  func sClient(_ options: String) throws -> String {
    let request = "GET /hello HTTP/1.1\\r\\nHost: httpbin.org\\r\\nConnection: close\\r\\n\\r\\n"
    return try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "printf '\(request)' | timeout 10 openssl s_client -proxy 127.0.0.1:\(port) -connect httpbin.org:443 "
          + "-servername httpbin.org \(options) -ign_eof 2>&1",
      ]
    ).stdout
  }

  func testTLS10ClientOfferingOnlyRSAKeyExchangeGetsTheRSALeaf() throws {
    try start(
      origin: try origin(),
      listenerOptions: ", downstream: {minimumTLSVersion: \"1.0\", ciphers: \"DEFAULT@SECLEVEL=0\"}")
    let output = try sClient("-tls1 -cipher AES128-SHA@SECLEVEL=0")
    XCTAssertTrue(output.contains("hello from origin"), output)
    XCTAssertTrue(
      output.contains("Cipher is AES128-SHA") || output.contains("Cipher    : AES128-SHA"), output)
    XCTAssertTrue(output.contains("Server public key is 2048 bit"), output)
  }

  func testClientOfferingOnlyECDSAGetsTheECDSALeaf() throws {
    try start(origin: try origin())
    let output = try sClient("-tls1_2 -cipher ECDHE-ECDSA-AES128-GCM-SHA256")
    XCTAssertTrue(output.contains("hello from origin"), output)
    XCTAssertTrue(output.contains("Server public key is 256 bit"), output)
  }

  func testTLS13ClientAcceptingOnlyRSASignaturesGetsTheRSALeaf() throws {
    try start(origin: try origin())
    let output = try sClient("-tls1_3 -sigalgs rsa_pss_rsae_sha256")
    XCTAssertTrue(output.contains("hello from origin"), output)
    XCTAssertTrue(output.contains("Server public key is 2048 bit"), output)
  }

  // MARK: 3. Plain HTTP inside a CONNECT

  func testPlainHTTPInsideConnectIsServedAsARequestForTheConnectHost() throws {
    let origin = try origin()
    try start(origin: origin)
    // curl --proxytunnel sends CONNECT httpbin.org:80 for an http:// URL,
    // then speaks plain HTTP in the tunnel, as undici's ProxyAgent does.
    let result = try Curl.run([
      "-v", "--proxytunnel", "-x", "http://127.0.0.1:\(port)", "http://httpbin.org/hello",
    ])
    XCTAssertEqual(result.status, 200, result.stderr)
    XCTAssertEqual(result.text, "hello from origin\n")
    XCTAssertTrue(result.stderr.contains("CONNECT httpbin.org:80"), result.stderr)
    // Upgraded to TLS, as http://httpbin.org/ in absolute form would be.
    XCTAssertGreaterThan(try origin.statsHandshakes(), 0)
  }

  func testPlainHTTPInsideConnectToARefusedHostIsThe502() throws {
    try start(origin: try origin())
    let response = try RawHTTP.exchange(
      port: port,
      "CONNECT pinned.httpbin.org:80 HTTP/1.1\r\nHost: pinned.httpbin.org:80\r\n\r\n"
        + "GET /hello HTTP/1.1\r\nHost: pinned.httpbin.org\r\n\r\n")
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 200 Connection established\r\n\r\nHTTP/1.1 502 "), response)
    XCTAssertTrue(response.contains("Pinproxy-Error: pin-mismatch\r\n"), response)
  }

  // MARK: 4. Refusals at CONNECT time reach the person

  func testDeniedHostOverHTTPSIsA403InsideTheTunnelWithoutContactingTheUpstream() throws {
    let origin = try origin()
    try start(origin: origin)
    let curl = try Curl.run(["-x", "http://127.0.0.1:\(port)", "--cacert", caPath, "https://example.com/"])
    XCTAssertEqual(curl.status, 403, curl.stderr)
    XCTAssertEqual(curl.pinproxyError, "denied-by-policy")
    XCTAssertTrue(curl.text.contains("no domain rule matches example.com"), curl.text)
    let script = """
      import ssl, urllib.request, urllib.error
      context = ssl.create_default_context(cafile="\(caPath)")
      opener = urllib.request.build_opener(
          urllib.request.ProxyHandler({"https": "http://127.0.0.1:\(port)"}), urllib.request.HTTPSHandler(context=context))
      try:
          opener.open("https://example.com/", timeout=10)
      except urllib.error.HTTPError as error:
          print(error.code, error.headers["Pinproxy-Error"])
      """
    let python = try Subprocess.run("/usr/bin/env", ["python3", "-c", script])
    XCTAssertEqual(python.stdout, "403 denied-by-policy\n", python.stderr)
    XCTAssertEqual(try origin.statsHandshakes(), 0, "a denied host is never contacted")
    // Both clients closed after their answer, so no connection lingers: a
    // drain finishes at once instead of waiting out timeouts.lingeringClose.
    let started = Date()
    proxy!.child.signal(SIGTERM)
    proxy!.child.waitForExit()
    XCTAssertLessThan(Date().timeIntervalSince(started), 5, proxy!.log)
    XCTAssertTrue(proxy!.child.wait(for: "unfinished_connections=0"), proxy!.log)
  }

  func testPortNotAllowedAndListenersThatDoNotInterceptKeepThePlain403() throws {
    try start(origin: try origin(), listenerOptions: ", allowedConnectPorts: [443]")
    let port = try RawHTTP.exchange(
      port: self.port, "CONNECT httpbin.org:8443 HTTP/1.1\r\nHost: httpbin.org:8443\r\n\r\n")
    XCTAssertTrue(port.hasPrefix("HTTP/1.1 403 "), port)
    XCTAssertTrue(port.contains("Pinproxy-Error: denied-by-policy\r\n"), port)
    proxy = nil
    try start(origin: try origin(), listenerOptions: ", intercept: false")
    let denied = try RawHTTP.exchange(
      port: self.port, "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    XCTAssertTrue(denied.hasPrefix("HTTP/1.1 403 "), denied)
  }

  // MARK: 5. A page a person can read

  func testBrowserGetsAnEscapedHTMLPageAndOtherClientsPlainText() throws {
    try start(origin: try origin())
    let html = try Curl.run([
      "-x", "http://127.0.0.1:\(port)", "--cacert", caPath, "-H",
      "Accept: text/html,application/xhtml+xml;q=0.9,*/*;q=0.8", "-A", "Mozilla/5.0 (X11; Linux x86_64)",
      "https://pinned.httpbin.org/<script>",
    ])
    XCTAssertEqual(html.status, 502)
    XCTAssertEqual(html.pinproxyError, "pin-mismatch")
    XCTAssertEqual(html.headers["content-type"], "text/html; charset=utf-8")
    XCTAssertTrue(
      html.text.contains("<h1>This site&#39;s certificate does not match what it is pinned to</h1>"),
      html.text)
    XCTAssertTrue(html.text.contains("pin-mismatch"))
    XCTAssertTrue(html.text.contains("pinned.httpbin.org:443"))
    XCTAssertTrue(html.text.contains("<details>"), "the chain's pins are folded away")
    XCTAssertTrue(html.text.contains("pinproxy pin --config FILE pinned.httpbin.org:443"), html.text)
    XCTAssertFalse(html.text.contains("<script"), "nothing the client sent is echoed unescaped")
    XCTAssertFalse(html.text.contains("src="), "self-contained: nothing loaded from elsewhere")
    let plain = try Curl.run([
      "-x", "http://127.0.0.1:\(port)", "--cacert", caPath, "https://pinned.httpbin.org/",
    ])
    XCTAssertEqual(plain.headers["content-type"], "text/plain; charset=utf-8")
    XCTAssertTrue(plain.text.hasPrefix("pinproxy: pin-mismatch: "), plain.text)
  }

  func testChromiumShowsTheRefusalPageHeading() throws {
    try start(origin: try origin())
    let chromium = try Chromium.path()
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "chromium-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let common = [
      "--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(directory.path)",
      "--proxy-server=http://127.0.0.1:\(port)", "--ignore-certificate-errors", "--window-size=1000,700",
    ]
    let dom = try Subprocess.run(chromium, common + ["--dump-dom", "https://pinned.httpbin.org/"])
    XCTAssertTrue(
      dom.stdout.contains("This site's certificate does not match what it is pinned to"),
      dom.stdout + dom.stderr)
    XCTAssertTrue(dom.stdout.contains("pin-mismatch"))
    // Chromium offers h2 inside the CONNECT: the page was a refusal on one
    // HTTP/2 stream (its log line names the stream).
    XCTAssertTrue(
      proxy!.waitForLine { $0.contains("code=pin-mismatch") && $0.contains("stream=") }, proxy!.log)
    // A host the policy denies: the CONNECT is accepted and the 403 page is
    // what the browser shows, not a generic tunnel error.
    let denied = try Subprocess.run(chromium, common + ["--dump-dom", "https://example.com/"])
    XCTAssertTrue(
      denied.stdout.contains("This site is not allowed through this proxy"), denied.stdout + denied.stderr)
    XCTAssertTrue(denied.stdout.contains("denied-by-policy"))
    // The screenshot is kept as the test's artifact (Tests/Artifacts, ignored by git).
    let artifacts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("Artifacts")
    try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
    let screenshot = artifacts.appendingPathComponent("refusal-page.png").path
    try? FileManager.default.removeItem(atPath: screenshot)
    _ = try Subprocess.run(chromium, common + ["--screenshot=\(screenshot)", "https://pinned.httpbin.org/"])
    let size = (try? FileManager.default.attributesOfItem(atPath: screenshot)[.size] as? Int) ?? 0
    XCTAssertGreaterThan(size ?? 0, 10_000, "a rendered page, not an empty image")
  }
}

/// `java File.java` (JDK 11+ single-file programs), from the JDK the test
/// setup installs. Missing Java is a failure, never a skip.
enum Java {
  /// A Java method making a TLS context that trusts only the PEM at `path`
  /// (the proxy's local CA), for the programs below.
  static let trustingMethod = """
    static SSLContext trusting(String path) throws Exception {
        KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
        store.load(null, null);
        try (InputStream in = new FileInputStream(path)) {
          store.setCertificateEntry("pinproxy", CertificateFactory.getInstance("X.509").generateCertificate(in));
        }
        TrustManagerFactory trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        trust.init(store);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, trust.getTrustManagers(), null);
        return tls;
      }
    """
  static func run(_ source: String, arguments: [String]) throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("java-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let name =
      source.components(separatedBy: "public class ").dropFirst().first?.split(separator: " ").first ?? "Main"
    let file = directory.appendingPathComponent("\(name).java").path
    try source.write(toFile: file, atomically: true, encoding: .utf8)
    let result = try Subprocess.run("/usr/bin/env", ["java", file] + arguments)
    guard result.status == 0 else { throw HarnessError("java failed (\(result.status)): \(result.stderr)") }
    return result.stdout
  }
}

/// Debian's headless-capable Chromium, which the test setup installs.
enum Chromium {
  static func path() throws -> String {
    for candidate in ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
    where FileManager.default.isExecutableFile(atPath: candidate) {
      return candidate
    }
    throw HarnessError("chromium is not installed (scripts/install-deps.sh installs it)")
  }

  /// Chromium's path, a fresh profile directory (the caller removes it)
  /// and the arguments every headless run here takes.
  static func headless() throws -> (path: String, profile: URL, arguments: [String]) {
    let profile = FileManager.default.temporaryDirectory.appendingPathComponent(
      "chromium-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: profile, withIntermediateDirectories: true)
    return (
      try path(), profile,
      ["--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)"]
    )
  }
}
