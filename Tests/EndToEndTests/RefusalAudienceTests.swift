import Foundation
import PinTestSupport
import XCTest

/// A refusal speaks to whoever reads it. HTML
/// only for browsers and web views (Java's HttpURLConnection accepts
/// `text/html` first and gets plain text), a page whose `pinproxy pin`
/// command works for a host behind `connectTo`, and a client TLS refusal
/// whose log line names the listener and the key that decides it.
final class RefusalAudienceTests: ProxyTestCase {
  var caPath: String { proxy!.directory.appendingPathComponent("state/ca.pem").path }
  var port: Int { proxy!.ports["forward"]! }

  /// One intercepting forward listener with default settings: httpbin.org
  /// allowed, pinned.httpbin.org pinned to a key its origin does not have,
  /// both reachable only through `connectTo`.
  func start() throws -> Origin {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
        connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)", "pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny}
        domains:
          - {domain: httpbin.org, anchors: [test]}
          - domain: pinned.httpbin.org
            anchors: [test]
            pinningMode: publicKey
            pinnedPublicKeyHashes: ["\(Fixtures.certificate("adn.pem").spkiPin)"]
        """, listeners: ["forward"])
    return origin
  }

  static let chromeAgent =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
  static let browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

  func curl(_ url: String, _ headers: [String], http2: Bool = false) throws -> CurlResult {
    try Curl.run(
      ["-x", "http://127.0.0.1:\(port)", "--cacert", caPath] + (http2 ? ["--http2"] : [])
        + headers.flatMap { ["-H", $0] } + [url])
  }

  func testJavaHttpURLConnectionGetsPlainTextAndBrowsersGetTheHTMLPage() throws {
    _ = try start()
    let output = try Java.run(
      """
      import java.net.*; import java.io.*; import javax.net.ssl.*; import java.security.*; import java.security.cert.*;
      public class Legacy {
        \(Java.trustingMethod)
        public static void main(String[] args) throws Exception {
          Proxy proxy = new Proxy(Proxy.Type.HTTP, new InetSocketAddress("127.0.0.1", Integer.parseInt(args[0])));
          SSLContext tls = trusting(args[1]);
          for (String url : new String[] {"https://httpbin.org/headers", "https://pinned.httpbin.org/",
              "http://pinned.httpbin.org/"}) {
            HttpURLConnection connection = (HttpURLConnection) new URL(url).openConnection(proxy);
            if (connection instanceof HttpsURLConnection) {
              ((HttpsURLConnection) connection).setSSLSocketFactory(tls.getSocketFactory());
            }
            int status = connection.getResponseCode();
            InputStream body = status < 400 ? connection.getInputStream() : connection.getErrorStream();
            BufferedReader reader = new BufferedReader(new InputStreamReader(body, "UTF-8"));
            String line, accept = "";
            StringBuilder text = new StringBuilder();
            while ((line = reader.readLine()) != null) {
              if (line.startsWith("Accept: ")) accept = line;
              if (text.length() == 0) text.append(line);
            }
            System.out.println(url + " | " + status + " | " + connection.getContentType() + " | "
                + (status < 400 ? accept : text));
          }
        }
      }
      """, arguments: [String(port), caPath])
    let lines = output.split(separator: "\n").map(String.init)
    XCTAssertEqual(lines.count, 3, output)
    // What Java sends by default: HTML listed first (JDK 17: `text/html, image/gif, image/jpeg, */*;
    // q=0.2`; older JDKs: `…, *; q=.2, */*; q=.2`), and no browser's User-Agent.
    XCTAssertTrue(
      lines[0].hasPrefix(
        "https://httpbin.org/headers | 200 | text/plain | Accept: text/html, image/gif, image/jpeg, "),
      output)
    for (line, url) in zip(lines.dropFirst(), ["https://pinned.httpbin.org/", "http://pinned.httpbin.org/"]) {
      XCTAssertTrue(
        line.hasPrefix("\(url) | 502 | text/plain; charset=utf-8 | pinproxy: pin-mismatch: "), output)
    }

    // Browsers and web views, as curl sends their headers: the page, on HTTP/1.1 and HTTP/2.
    let browsers: [([String], Bool)] = [
      (["User-Agent: \(Self.chromeAgent)", "Accept: \(Self.browserAccept)"], false),
      (["Sec-Fetch-Mode: navigate"], false),
      (["Upgrade-Insecure-Requests: 1", "Accept: \(Self.browserAccept)"], true),
      (["User-Agent: \(Self.chromeAgent)", "Accept: \(Self.browserAccept)"], true),
    ]
    for (headers, http2) in browsers {
      let result = try curl("https://pinned.httpbin.org/", headers, http2: http2)
      XCTAssertEqual(result.status, 502, "\(headers) \(result.stderr)")
      XCTAssertEqual(result.headers["content-type"], "text/html; charset=utf-8", "\(headers) http2=\(http2)")
      XCTAssertTrue(result.text.contains("<h1>This site&#39;s certificate does not match"), result.text)
    }
    // Programs: HTML in Accept without a browser, a browser's fetch(), a browser agent that asks for data.
    let programs: [([String], Bool)] = [
      (["Accept: \(Self.browserAccept)"], false),
      (["Accept: \(Self.browserAccept)"], true),
      (["User-Agent: \(Self.chromeAgent)", "Sec-Fetch-Mode: cors", "Accept: application/json"], false),
      (["User-Agent: \(Self.chromeAgent)", "Accept: */*"], true),
    ]
    for (headers, http2) in programs {
      let result = try curl("https://pinned.httpbin.org/", headers, http2: http2)
      XCTAssertEqual(result.status, 502, "\(headers) \(result.stderr)")
      XCTAssertEqual(result.headers["content-type"], "text/plain; charset=utf-8", "\(headers) http2=\(http2)")
      XCTAssertTrue(result.text.hasPrefix("pinproxy: pin-mismatch: "), result.text)
    }
  }

  func testThePagesPinCommandWorksAsPrintedForAHostBehindConnectTo() throws {
    let origin = try start()
    // A browser's headers that get the page under any rule for choosing it.
    let browser = ["User-Agent: \(Self.chromeAgent)", "Accept: \(Self.browserAccept)"]
    let page = try curl("https://pinned.httpbin.org/", browser)
    XCTAssertEqual(page.status, 502, page.stderr)
    let command = try XCTUnwrap(
      page.text.components(separatedBy: "<pre><code>").dropFirst().first {
        $0.hasPrefix("pinproxy pin ")
      }?.components(separatedBy: "</code>").first, page.text)
    XCTAssertEqual(command, "pinproxy pin --config FILE pinned.httpbin.org:443")
    // Run as printed, with the proxy's configuration as FILE.
    let arguments = command.split(separator: " ").dropFirst().map {
      $0 == "FILE" ? proxy!.configFile : String($0)
    }
    let pinned = try Subprocess.pinproxy(Array(arguments))
    XCTAssertEqual(pinned.status, 0, pinned.stderr)
    XCTAssertTrue(
      pinned.stdout.contains("pin:      \(Fixtures.certificate("httpbin.pem").spkiPin)"), pinned.stdout)
    XCTAssertTrue(
      pinned.stderr.contains("connecting to 127.0.0.1:\(origin.port) for pinned.httpbin.org:443"),
      pinned.stderr)
    // The same mapping given on the command line, curl's way.
    let flag = try Subprocess.pinproxy([
      "pin", "--connect-to", "pinned.httpbin.org:443:127.0.0.1:\(origin.port)", "pinned.httpbin.org:443",
    ])
    XCTAssertEqual(flag.status, 0, flag.stderr)
    XCTAssertEqual(flag.stdout, pinned.stdout)

    // A denied host has no rule: the page says so in words.
    let denied = try curl("https://example.com/", browser)
    XCTAssertEqual(denied.status, 403, denied.stderr)
    XCTAssertTrue(denied.text.contains("<dt>Rule</dt><dd><code>none</code></dd>"), denied.text)
  }

  func testATLS10ClientRefusedByTheDefaultListenerIsLoggedWithTheListenerAndTheKey() throws {
    _ = try start()
    let output = try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "printf 'GET /hello HTTP/1.1\\r\\nHost: httpbin.org\\r\\n\\r\\n' | timeout 10 openssl s_client"
          + " -proxy 127.0.0.1:\(port) -connect httpbin.org:443 -servername httpbin.org -tls1"
          + " -cipher 'DEFAULT@SECLEVEL=0' 2>&1",
      ]
    ).stdout
    XCTAssertFalse(output.contains("hello from origin"), output)
    XCTAssertTrue(proxy!.child.wait(for: "code=handshake-failed"), proxy!.log)
    let line = try XCTUnwrap(
      proxy!.completeLogLines.first { $0.contains("code=handshake-failed") }, proxy!.log)
    // The fields the refused event always had, then the listener and the key.
    for field in [
      "warn refused ", "client=127.0.0.1:", "host=httpbin.org:443",
      "reason=\"client TLS handshake failed: ",
    ] {
      XCTAssertTrue(line.contains(field), "\(field) in \(line)")
    }
    XCTAssertTrue(line.contains("unsupported protocol"), line)
    XCTAssertTrue(line.contains(" listener=forward "), line)
    XCTAssertTrue(
      line.contains(
        "note=\"the client's TLS version is below listener forward's floor, downstream.minimumTLSVersion"
          + " \\\"1.2\\\"; lowering that key lets such clients in\""), line)
    // A refusal for another reason names the listener and has no such note.
    _ = try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "printf '' | timeout 10 openssl s_client -proxy 127.0.0.1:\(port) -connect httpbin.org:443"
          + " -servername other.example 2>&1",
      ])
    XCTAssertTrue(proxy!.child.wait(for: "(SNI) inside a CONNECT"), proxy!.log)
    let sni = try XCTUnwrap(
      proxy!.completeLogLines.first { $0.contains("(SNI) inside a CONNECT") }, proxy!.log)
    XCTAssertTrue(sni.contains(" listener=forward "), sni)
    XCTAssertFalse(sni.contains("note="), sni)
  }
}
