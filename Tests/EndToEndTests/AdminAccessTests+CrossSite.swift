import Foundation
import PinTestSupport
import XCTest

/// The admin endpoint against web pages and against local processes that
/// hold its slots: a page on another port of 127.0.0.1, opened in headless
/// Chromium, cannot make it reload; 40 connections that keep every slot
/// filled with half-sent heads, re-opening the moment one is evicted, do
/// not fail a health probe.
extension AdminAccessTests {
  func post(_ headers: [String]) throws -> CurlResult {
    try Curl.run(["-X", "POST"] + headers.flatMap { ["-H", $0] } + ["http://127.0.0.1:\(adminPort)/reload"])
  }

  /// `POST /reload` with another site's `Origin` or `Sec-Fetch-Site`, or
  /// without the `Pinproxy-Admin` field, is refused 403 and logged; with the
  /// field and nothing cross-site it reloads, as `pinproxy reload` does.
  func testAReloadNeedsItsFieldAndNoSignOfAnotherSite() throws {
    try start(admin: #"{address: "127.0.0.1:{port:admin}"}"#)
    let crossSite = try post([
      "Origin: http://evil.example", "Sec-Fetch-Site: cross-site", "Pinproxy-Admin: 1",
    ])
    XCTAssertEqual(crossSite.status, 403, crossSite.text)
    XCTAssertTrue(crossSite.text.contains("cross-site"), crossSite.text)
    let otherPort = try post(["Origin: http://127.0.0.1:1", "Pinproxy-Admin: 1"])
    XCTAssertEqual(otherPort.status, 403, otherPort.text)
    XCTAssertTrue(otherPort.text.contains("is not this endpoint's own"), otherPort.text)
    let bare = try post([])
    XCTAssertEqual(bare.status, 403, bare.text)
    XCTAssertTrue(bare.text.contains("Pinproxy-Admin"), bare.text)
    XCTAssertTrue(proxy!.child.wait(for: "admin-refused"), proxy!.log)
    XCTAssertFalse(proxy!.log.contains("reload-ok"), proxy!.log)
    let own = try post([
      "Origin: http://127.0.0.1:\(adminPort)", "Sec-Fetch-Site: same-origin", "Pinproxy-Admin: 1",
    ])
    XCTAssertEqual(own.status, 200, own.text)
    XCTAssertEqual(own.text, "ok generation 2\n")
    let command = try Subprocess.run(
      Subprocess.pinproxyPath, ["reload", "--admin", "127.0.0.1:\(adminPort)"])
    XCTAssertEqual(command.stdout, "ok generation 3\n", command.stderr)
  }

  /// A page served from 127.0.0.1 on another port posts to `/reload` twice
  /// (a `no-cors` fetch, then a `text/plain` form), as any page could:
  /// both refused, no generation made.
  func testAPageOnAnotherLoopbackPortCannotReload() throws {
    try start(admin: #"{address: "127.0.0.1:{port:admin}"}"#)
    // Both posts start from the inline script, before the load event that
    // --dump-dom waits for (the form posts into a frame, whose load the
    // page's load waits for): no timers, nothing for Chromium to wait on.
    let page = """
      <!doctype html><title>evil</title>
      <iframe name="sink"></iframe>
      <form id="f" method="POST" action="http://127.0.0.1:\(adminPort)/reload" enctype="text/plain" target="sink">
      <input name="a" value="b"></form>
      <script>
      fetch("http://127.0.0.1:\(adminPort)/reload", {method: "POST", mode: "no-cors", body: "x"}).catch(() => {});
      document.getElementById("f").submit();
      </script>
      """
    try page.write(to: scratch.appendingPathComponent("page.html"), atomically: true, encoding: .utf8)
    let server = try ChildProcessLauncher.python(
      "-c",
      [
        """
        import functools, http.server, sys
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        print("READY %d" % server.server_address[1], flush=True)
        server.serve_forever()
        """, scratch.path,
      ])
    defer { server.stop() }
    XCTAssertTrue(server.wait(for: "READY"), server.currentOutput)
    let pagePort = try XCTUnwrap(
      server.currentOutput.split(separator: " ").last.flatMap {
        Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
      })
    let chromium = try Chromium.headless()
    defer { try? FileManager.default.removeItem(at: chromium.profile) }
    // Bounded: a headless run that never ends fails the test, not the suite.
    _ = try Subprocess.run(
      "/usr/bin/timeout",
      ["60", chromium.path] + chromium.arguments + ["--dump-dom", "http://127.0.0.1:\(pagePort)/page.html"])
    XCTAssertTrue(
      try eventually { self.proxy!.completeLogLines.filter { $0.contains(" admin-refused ") }.count >= 2 },
      proxy!.log)
    let refusals = proxy!.completeLogLines.filter { $0.contains(" admin-refused ") }
    XCTAssertTrue(
      refusals.allSatisfy { $0.contains("same-site") || $0.contains("127.0.0.1:\(pagePort)") },
      refusals.joined(separator: "\n"))
    XCTAssertFalse(proxy!.log.contains("reload-ok"), proxy!.log)
    let metrics = try admin("/metrics").text
    XCTAssertTrue(metrics.contains("pinproxy_config_generation 1"), metrics)
  }

  /// 40 local connections keep every admin slot filled with half-sent
  /// heads, each re-opened at once when it is evicted: 15 of 15 health
  /// probes are answered (a probe, not read yet when the next holder
  /// arrives, is not the one evicted).
  func testHalfHeadsReopenedAtOnceDoNotFailAHealthProbe() throws {
    try start(admin: #"{address: "127.0.0.1:{port:admin}"}"#)
    let holders = try ChildProcessLauncher.python(
      "-c",
      [
        """
        import selectors, socket, sys, time
        port = int(sys.argv[1])
        selector = selectors.DefaultSelector()
        def hold():
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            selector.register(s, selectors.EVENT_WRITE)
        for _ in range(40):
            hold()
        reopened, end, said = 0, time.time() + 90, False
        while time.time() < end:
            for key, events in selector.select(timeout=0.5):
                s = key.fileobj
                if events & selectors.EVENT_WRITE:
                    try:
                        s.send(b"GET /heal")
                        selector.modify(s, selectors.EVENT_READ)
                    except OSError:
                        selector.unregister(s); s.close(); hold(); reopened += 1
                    continue
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    selector.unregister(s); s.close(); hold(); reopened += 1
            if reopened > 100 and not said:
                print("CHURNING", flush=True)
                said = True
        """, String(adminPort),
      ])
    defer { holders.stop() }
    XCTAssertTrue(holders.wait(for: "CHURNING", timeout: 20), holders.currentOutput)
    var answered = 0
    for probe in 1...15 {
      let health = try Curl.run(["--max-time", "5", "http://127.0.0.1:\(adminPort)/healthz"])
      if health.status == 200 && health.text == "ok\n" {
        answered += 1
      } else {
        XCTFail("probe \(probe): \(health.status) \(health.stderr)")
      }
    }
    XCTAssertEqual(answered, 15)
  }
}
