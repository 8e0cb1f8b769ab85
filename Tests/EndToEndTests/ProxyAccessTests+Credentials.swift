import Foundation
import PinTestSupport
import XCTest

/// `proxyAuth` with the clients people run — curl (absolute-form, CONNECT,
/// h2 inside the tunnel), Python requests, Java's HttpClient, headless
/// Chromium — and what a guesser, the logs and a reload see of it.
extension ProxyAccessTests {
  // MARK: 4. proxyAuth with curl

  func testProxyAuthWithCurlForAbsoluteFormConnectAndHTTP2InsideTheTunnel() throws {
    try start(proxyAuth(try htpasswd(), #", realm: "Test Realm""#))
    let url = "http://httpbin.org/hello"
    let right = try get(url, through: port, ["--proxy-user", "alice:\(Self.password)"])
    XCTAssertEqual(right.status, 200, right.stderr + right.text)
    XCTAssertEqual(right.text, "hello from origin\n")

    // The credential is for the proxy: it is never forwarded to the origin (RFC 9110 §11.7.2),
    // neither in absolute form nor inside an authenticated tunnel.
    let echoed = try get(
      "http://httpbin.org/headers", through: port, ["--proxy-user", "alice:\(Self.password)"])
    XCTAssertEqual(echoed.status, 200, echoed.text)
    XCTAssertFalse(echoed.text.lowercased().contains("proxy-authorization"), echoed.text)
    let inside = try Curl.run([
      "-x", "http://127.0.0.1:\(port)", "--proxy-user", "alice:\(Self.password)", "--cacert", caPath,
      "-H", "Proxy-Authorization: Basic YWxpY2U6eA==", "https://httpbin.org/headers",
    ])
    XCTAssertEqual(inside.status, 200, inside.stderr)
    XCTAssertFalse(inside.text.lowercased().contains("proxy-authorization"), inside.text)

    for (label, extra) in [
      ("wrong password", ["--proxy-user", "alice:not-the-password"]), ("no credentials", []),
    ] {
      let refused = try get(url, through: port, extra)
      XCTAssertEqual(refused.status, 407, "\(label): \(refused.text)")
      XCTAssertEqual(
        refused.headers["proxy-authenticate"], #"Basic realm="Test Realm", charset="UTF-8""#, label)
      XCTAssertEqual(refused.pinproxyError, "proxy-auth-required", label)
      XCTAssertEqual(refused.headers["connection"], "close", label)
    }
    // CONNECT without credentials: the tunnel itself is refused with 407.
    let tunnel = try curlOutcome(["-x", "http://127.0.0.1:\(port)", "-k", "https://httpbin.org/hello"])
    XCTAssertNotEqual(tunnel.exit, 0, "\(tunnel)")
    XCTAssertTrue(tunnel.codes.hasPrefix("000 407 "), "http_connect must be 407: \(tunnel)")
    // CONNECT with credentials: served over HTTP/1.1, then HTTP/2, inside the tunnel (no further credential).
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
      let arguments = [
        "-x", "http://127.0.0.1:\(port)", "--proxy-user", "alice:\(Self.password)", "--cacert", caPath, flag,
        "https://httpbin.org/hello",
      ]
      let outcome = try curlOutcome(arguments)
      XCTAssertEqual(outcome.exit, 0, "\(flag): \(outcome.stderr)")
      XCTAssertEqual(
        outcome.codes, "200 200 \(version)", "\(flag): CONNECT 200, then \(version) inside the tunnel")
      let body = try Curl.run(arguments)
      XCTAssertEqual(body.text, "hello from origin\n", "\(flag): \(body.stderr)")
    }
    // A local client's access line waits for its program's lookup.
    XCTAssertTrue(
      eventually {
        proxy!.completeLogLines.contains {
          $0.contains(" request ") && $0.contains("path=/hello") && $0.contains("client_protocol=h2")
        }
      }, proxy!.log)
  }

  // MARK: 5. proxyAuth with Python requests

  func testProxyAuthWithPythonRequestsCredentialsInTheProxyURL() throws {
    try start(proxyAuth(try htpasswd()))
    let script = """
      import sys, requests
      port, password = sys.argv[1], sys.argv[2]
      for label, secret in [("right", password), ("wrong", "wrong-guess")]:
          proxy = f"http://alice:{secret}@127.0.0.1:{port}"
          response = requests.get("http://httpbin.org/hello", proxies={"http": proxy, "https": proxy}, timeout=30)
          print(label, response.status_code, response.headers.get("Pinproxy-Error", "-"), repr(response.text[:40]))
      """
    let result = try Subprocess.run("/usr/bin/env", ["python3", "-c", script, String(port), Self.password])
    XCTAssertEqual(result.status, 0, result.stderr)
    let lines = result.stdout.split(separator: "\n").map(String.init)
    XCTAssertEqual(lines.first, "right 200 - 'hello from origin\\n'", result.stdout + result.stderr)
    XCTAssertEqual(lines.dropFirst().first?.hasPrefix("wrong 407 proxy-auth-required "), true, result.stdout)
  }

  // MARK: 6. proxyAuth with Java's HttpClient and an Authenticator

  func testProxyAuthWithJavaHttpClientAuthenticator() throws {
    let origin = try origin()
    try start(proxyAuth(try htpasswd(), #", realm: "Java Realm""#), origin: origin)
    let output = try Java.run(
      """
      import java.net.*; import java.net.http.*;
      public class ProxyAuth {
        static HttpClient client(int port, String password) {
          HttpClient.Builder builder = HttpClient.newBuilder()
              .proxy(ProxySelector.of(new InetSocketAddress("127.0.0.1", port)));
          if (password == null) return builder.build();
          return builder.authenticator(new Authenticator() {
            protected PasswordAuthentication getPasswordAuthentication() {
              if (getRequestorType() != RequestorType.PROXY) return null;
              System.out.println("asked " + getRequestingScheme() + " realm=" + getRequestingPrompt());
              return new PasswordAuthentication("alice", password.toCharArray());
            }
          }).build();
        }
        public static void main(String[] args) throws Exception {
          int port = Integer.parseInt(args[0]);
          HttpRequest request = HttpRequest.newBuilder(URI.create("http://httpbin.org/hello")).build();
          String[][] cases = {{"right", args[1]}, {"wrong", "wrong-guess"}, {"none", null}};
          for (String[] c : cases) {
            try {
              HttpResponse<String> response = client(port, c[1])
                  .send(request, HttpResponse.BodyHandlers.ofString());
              System.out.println(c[0] + " " + response.statusCode() + " "
                  + response.headers().firstValue("Proxy-Authenticate").orElse("-") + " | " + response.body().trim());
            } catch (java.io.IOException e) {
              System.out.println(c[0] + " exception " + e.getMessage());
            }
          }
        }
      }
      """, arguments: [String(port), Self.password])
    let lines = output.split(separator: "\n").map(String.init)
    // Right password: challenged once, then served.
    XCTAssertEqual(
      Array(lines.prefix(2)), ["asked basic realm=Java Realm", "right 200 - | hello from origin"], output)
    // A wrong password the Authenticator keeps giving: HttpClient retries and
    // then gives up with an IOException (its retry limit, 3), never a 200.
    let wrong = try XCTUnwrap(lines.first { $0.hasPrefix("wrong ") }, output)
    XCTAssertEqual(wrong, "wrong exception too many authentication attempts. Limit: 3", output)
    // No Authenticator: the proxy's 407, challenge and all, is what the
    // program gets (its body's second line, the incident id, follows).
    XCTAssertTrue(lines.last?.hasPrefix("incident: ") ?? false, output)
    XCTAssertEqual(
      lines.dropLast().last,
      #"none 407 Basic realm="Java Realm", charset="UTF-8" | "#
        + "pinproxy: proxy-auth-required: this proxy requires a user name and password"
        + " (Proxy-Authorization: Basic)", output)
    XCTAssertEqual(
      origin.requests.filter { $0 == "GET /hello" }.count, 1, "only the right password was forwarded")
    // Java sends without credentials first: that 407 is no failed attempt; the wrong ones are.
    XCTAssertTrue(
      eventually {
        self.logLines("refused").filter { $0.contains("user name or password is not right") }.count >= 4
      }, proxy!.log)
    let refused = logLines("refused").filter { $0.contains("code=proxy-auth-required") }
    XCTAssertEqual(
      refused.filter { $0.contains("user name or password is not right") }.count, 4,
      "4 wrong tries (the first and 3 retries):\n\(proxy!.log)")
    XCTAssertEqual(
      refused.filter { $0.contains("requires a user name and password") }.count, 3,
      "each client's first request, sent without credentials:\n\(proxy!.log)")
  }

  // MARK: 7. Chromium

  func testChromiumWithoutCredentialsGetsTheProxys407AndNothingReachesTheOrigin() throws {
    let origin = try origin()
    try start(proxyAuth(try htpasswd()), origin: origin)
    let chromium = try Chromium.path()
    let common = [
      "--headless=new", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(scratchPath("chromium"))",
      "--disable-background-networking", "--disable-component-update", "--disable-features=HttpsUpgrades",
      "--proxy-server=http://127.0.0.1:\(port)",
    ]
    for (url, method, target) in [
      ("http://httpbin.org/hello", "GET", "httpbin.org"),
      ("https://httpbin.org/hello", "CONNECT", "httpbin.org:443"),
    ] {
      let dom = try Subprocess.run(chromium, common + ["--dump-dom", url])
      // Headless Chromium has nobody to ask for a password: it gives up on
      // the challenge. A tunnel or connection error would say otherwise.
      XCTAssertTrue(dom.stderr.contains("net::ERR_INVALID_AUTH_CREDENTIALS"), "\(url): \(dom.stderr)")
      for error in ["ERR_TUNNEL_CONNECTION_FAILED", "ERR_PROXY_CONNECTION_FAILED", "ERR_EMPTY_RESPONSE"] {
        XCTAssertFalse(dom.stderr.contains(error), "\(url): \(dom.stderr)")
      }
      XCTAssertFalse(dom.stdout.contains("hello from origin"), dom.stdout)
      XCTAssertTrue(
        proxy!.waitForLine {
          $0.contains(" refused ") && $0.contains("method=\(method) ") && $0.contains("host=\(target)")
        })
      let line = logLines("refused").first {
        $0.contains("method=\(method) ") && $0.contains("host=\(target)")
      }
      XCTAssertNotNil(line, "\(url): the proxy's 407 for Chromium's request:\n\(proxy!.log)")
      XCTAssertTrue(line?.contains("code=proxy-auth-required") ?? false, line ?? "")
      XCTAssertTrue(line?.contains("status=407") ?? false, line ?? "")
    }
    XCTAssertFalse(origin.requests.contains("GET /hello"), "nothing reached the origin: \(origin.requests)")
  }

  // MARK: 8. Guessing

  func testGuessingIsThrottledEvenForTheRightPasswordAndNoPasswordIsEverWrittenDown() throws {
    try start(proxyAuth(try htpasswd(), ", logUser: true"))
    // 40 wrong passwords as fast as curl goes, one process per attempt.
    let script = """
      for i in $(seq 1 40); do
        curl -s -o /dev/null -D - --max-time 10 -x "http://127.0.0.1:$1" --proxy-user "alice:guess-$i-zq" \
          http://httpbin.org/hello | tr -d '\\r' | grep -i -E '^(HTTP/|retry-after:|pinproxy-error:)' | tr '\\n' ' '
        echo
      done
      """
    let started = Date()
    let result = try Subprocess.run("/bin/sh", ["-c", script, "sh", String(port)])
    let elapsed = Date().timeIntervalSince(started)
    let answers = result.stdout.split(separator: "\n").map(String.init)
    XCTAssertEqual(answers.count, 40, result.stdout + result.stderr)
    let challenged = answers.filter { $0.hasPrefix("HTTP/1.1 407 ") }
    let throttled = answers.filter { $0.hasPrefix("HTTP/1.1 429 ") }
    XCTAssertEqual(challenged.count + throttled.count, 40, result.stdout)
    XCTAssertGreaterThanOrEqual(challenged.count, 10, "the first 10 guesses are answered: \(result.stdout)")
    XCTAssertLessThanOrEqual(
      Double(challenged.count), 10 + 0.5 * elapsed + 1, "at most the burst and the refill in \(elapsed) s")
    XCTAssertGreaterThan(throttled.count, 0, result.stdout)
    for line in throttled {
      XCTAssertTrue(line.lowercased().contains("retry-after: "), line)
      XCTAssertTrue(line.lowercased().contains("pinproxy-error: proxy-auth-required"), line)
    }

    func field(_ name: String, of head: String) -> String? {
      head.split(separator: "\r\n").first { $0.lowercased().hasPrefix(name + ":") }
        .map { $0.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces) }
    }

    // The right password while throttled: still 429, from 127.0.0.1 and from
    // 127.0.0.5 (all of 127.0.0.0/8 is one client: no fresh bucket). A token
    // refills every 2 s, and one that has refilled serves the right password
    // by design; so the test waits for the next token (Retry-After is rounded
    // up: the bucket then holds between 1 and 1.5), and one curl spends it on
    // a wrong guess (407) with the right password right behind it, which then
    // finds the bucket under one token for at least another second. A 429
    // says how long until the next token; a wrong guess answered 407 instead
    // (a token refilled) leaves less than one, so the next probe gets a 429.
    var due: Int?
    for attempt in 1...3 where due == nil {
      let probe = try Subprocess.run(
        "/usr/bin/curl",
        [
          "-s", "-o", "/dev/null", "-D", "-", "-x", "http://127.0.0.1:\(port)", "--proxy-user",
          "alice:probe-\(attempt)-zq", "http://httpbin.org/hello",
        ])
      guard probe.stdout.hasPrefix("HTTP/1.1 429 ") else { continue }
      due = field("retry-after", of: probe.stdout).flatMap { Int($0) }
    }
    usleep(UInt32(try XCTUnwrap(due, "no 429 with Retry-After in three wrong guesses")) * 1_000_000)
    let proxyURL = "http://127.0.0.1:\(port)"
    let sequence = try Subprocess.run(
      "/usr/bin/curl",
      [
        "-s", "-o", "/dev/null", "-D", "-", "-x", proxyURL, "--proxy-user", "alice:guess-last-zq",
        "http://httpbin.org/hello", "--next",
        "-s", "-o", "/dev/null", "-D", "-", "-x", proxyURL, "--proxy-user", "alice:\(Self.password)",
        "http://httpbin.org/hello", "--next",
        "-s", "-o", "/dev/null", "-D", "-", "--interface", "127.0.0.5", "-x", proxyURL,
        "--proxy-user", "alice:\(Self.password)", "http://httpbin.org/hello",
      ])
    let heads = sequence.stdout.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
    XCTAssertEqual(heads.count, 3, sequence.stdout + sequence.stderr)
    XCTAssertTrue(
      heads.first?.hasPrefix("HTTP/1.1 407 ") ?? false, "the wrong guess takes the token: \(heads)")
    for (index, head) in heads.enumerated().dropFirst() {
      let who = index == 1 ? "the right password" : "127.0.0.5, sharing 127.0.0.1's bucket"
      XCTAssertTrue(head.hasPrefix("HTTP/1.1 429 "), "\(who): \(head)")
      XCTAssertEqual(field("pinproxy-error", of: head), "proxy-auth-required", head)
    }
    let wait = try XCTUnwrap(
      Int(field("retry-after", of: heads.count > 1 ? heads[1] : "") ?? ""), sequence.stdout)
    XCTAssertGreaterThan(wait, 0)
    XCTAssertLessThanOrEqual(wait, 3, "one token refills in 2 s")
    XCTAssertFalse(origins[0].requests.contains("GET /hello"), "nothing was forwarded while throttled")
    // After Retry-After: served.
    usleep(UInt32(wait) * 1_000_000 + 200_000)
    let served = try get(
      "http://httpbin.org/hello", through: port, ["--proxy-user", "alice:\(Self.password)"])
    XCTAssertEqual(served.status, 200, served.text)
    XCTAssertEqual(served.text, "hello from origin\n")

    // No password, right or wrong, in the log or the metrics.
    let scraped = try metrics()
    XCTAssertTrue(proxy!.child.wait(for: " user=alice"), proxy!.log)
    for text in [proxy!.log, scraped] {
      XCTAssertFalse(text.contains(Self.password), "the password was written down")
      XCTAssertFalse(text.contains("-zq"), "a guessed password was written down")
      XCTAssertFalse(text.contains("guess-"), "a guessed password was written down")
    }
  }

  func testRequestsWithoutCredentialsAreNoFailedAttempts() throws {
    try start(proxyAuth(try htpasswd()))
    let url = "http://httpbin.org/hello"
    // Clients that wait to be challenged (Java, browsers) send without credentials first.
    for attempt in 1...15 {
      XCTAssertEqual(try get(url, through: port).status, 407, "attempt \(attempt) without credentials")
    }
    XCTAssertEqual(try get(url, through: port, ["--proxy-user", "alice:\(Self.password)"]).status, 200)
    // The bucket is whole: ten wrong passwords are each answered 407, not 429.
    for attempt in 1...10 {
      let result = try get(url, through: port, ["--proxy-user", "alice:wrong-\(attempt)"])
      XCTAssertEqual(result.status, 407, "wrong password \(attempt): \(result.text)")
    }
  }

  // MARK: 9. logUser

  func testLogUserPutsTheVerifiedUserInTheAccessLineAndTheMetric() throws {
    try start(proxyAuth(try htpasswd(), ", logUser: true"))
    for _ in 0..<2 {
      let result = try get(
        "http://httpbin.org/hello", through: port, ["--proxy-user", "alice:\(Self.password)"])
      XCTAssertEqual(result.status, 200, result.text)
    }
    XCTAssertTrue(
      eventually { logLines("request").filter { $0.contains("path=/hello") }.count == 2 }, proxy!.log)
    for line in logLines("request") {
      XCTAssertTrue(line.hasSuffix(" user=alice") || line.contains(" user=alice "), line)
    }
    let text = try metrics()
    XCTAssertEqual(sample(text, #"pinproxy_user_requests_total{listener="forward",user="alice"}"#), 2, text)
  }

  func testWithoutLogUserNoUserIsWrittenAnywhere() throws {
    try start(proxyAuth(try htpasswd()))
    let result = try get(
      "http://httpbin.org/hello", through: port, ["--proxy-user", "alice:\(Self.password)"])
    XCTAssertEqual(result.status, 200, result.text)
    XCTAssertTrue(eventually { !logLines("request").isEmpty }, proxy!.log)
    // `client_user` is the local user owning the client's socket (root here), not a proxy user.
    XCTAssertFalse(proxy!.log.contains(" user="), proxy!.log)
    XCTAssertFalse(proxy!.log.contains("alice"), proxy!.log)
    let text = try metrics()
    XCTAssertFalse(text.contains("user=\""), text)
    XCTAssertFalse(text.contains("alice"), text)
  }

  // MARK: 10. Reload

  func testReloadReadsTheNewHtpasswdAndABadOneKeepsTheOld() throws {
    let origin = try origin()
    let old = try htpasswd("users-1", password: "old-Passw0rd-1")
    try start(proxyAuth(old), origin: origin)
    let url = "http://httpbin.org/hello"
    XCTAssertEqual(try get(url, through: port, ["--proxy-user", "alice:old-Passw0rd-1"]).status, 200)

    // A new file in which alice's password changed, named by the rewritten configuration.
    let new = try htpasswd("users-2", password: "new-Passw0rd-2")
    let config = try String(contentsOfFile: proxy!.configFile, encoding: .utf8)
    try proxy!.rewrite(config: config.replacingOccurrences(of: old, with: new))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let stale = try get(url, through: port, ["--proxy-user", "alice:old-Passw0rd-1"])
    XCTAssertEqual(
      stale.status, 407, "the old password (cached as verified) is no longer good: \(stale.text)")
    XCTAssertEqual(try get(url, through: port, ["--proxy-user", "alice:new-Passw0rd-2"]).status, 200)

    // The same file rewritten with an Apache MD5 entry: the reload fails and the file in force stays.
    let md5 = try Subprocess.run(Htpasswd.tool, ["-m", "-b", "-c", new, "alice", "md5-Passw0rd-3"])
    XCTAssertEqual(md5.status, 0, md5.stderr)
    XCTAssertTrue(try String(contentsOfFile: new, encoding: .utf8).contains(":$apr1$"))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-failed"), proxy!.log)
    // The reason follows the reload-failed line: waited for, not read at once.
    XCTAssertTrue(proxy!.child.wait(for: "Apache MD5 ($apr1$)"), "the reason is logged:\n\(proxy!.log)")
    let kept = try get(url, through: port, ["--proxy-user", "alice:new-Passw0rd-2"])
    XCTAssertEqual(kept.status, 200, "the file in force is kept: \(kept.text)")
    XCTAssertEqual(try get(url, through: port, ["--proxy-user", "alice:md5-Passw0rd-3"]).status, 407)
  }
}
