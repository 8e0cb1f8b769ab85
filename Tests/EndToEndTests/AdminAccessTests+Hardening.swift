import Foundation
import PinTestSupport
import XCTest

/// The admin endpoint under a local attacker: a web page rebinding its
/// name to the admin address, and a process holding every slot with
/// half-sent heads.
extension AdminAccessTests {
  func testEveryAdminPathRefusesARebindingHostWithoutAToken() throws {
    try start(admin: #"{address: "127.0.0.1:{port:admin}"}"#)
    for path in ["/", "/status", "/metrics", "/policies", "/healthz"] {
      let rebound = try admin(path, ["Host: evil.example"])
      XCTAssertEqual(rebound.status, 403, "\(path) with Host evil.example: \(rebound.text)")
      XCTAssertFalse(rebound.text.contains("pinproxy_"), rebound.text)
      XCTAssertFalse(rebound.text.contains("domains"), rebound.text)
      XCTAssertEqual(try admin(path, ["Host: evil.example:\(adminPort)"]).status, 403, path)
      XCTAssertEqual(try admin(path).status, 200, "\(path) by address")
      XCTAssertEqual(try admin(path, ["Host: localhost:\(adminPort)"]).status, 200, "\(path) by localhost")
    }
  }

  func testWithATokenAnyHostIsServedAndAScraperStillNeedsAnAddressHost() throws {
    try start(
      admin: """
        {address: "127.0.0.1:{port:admin}", tokenFile: "\(try tokenFile())", metricsClients: ["127.0.0.3/32"]}
        """)
    let bearer = "Authorization: Bearer \(Self.token)"
    XCTAssertEqual(try admin("/policies", ["Host: admin.example", bearer]).status, 200)
    // A scraper reads without the token: the Host rule holds for it too.
    XCTAssertEqual(try admin("/metrics", from: "127.0.0.3", ["Host: evil.example"]).status, 403)
    XCTAssertEqual(try admin("/metrics", from: "127.0.0.3").status, 200)
  }

  /// 16 connections holding half-sent heads (every slot) do not fail a
  /// health probe: each probe evicts the longest-waiting head.
  func testStalledHeadsOnEverySlotDoNotFailAHealthProbe() throws {
    try start(admin: #"{address: "127.0.0.1:{port:admin}"}"#)
    let holder = try ChildProcessLauncher.python(
      "-c",
      [
        """
        import socket, sys, time
        held = []
        for _ in range(16):
            s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
            s.sendall(b"GET /heal")
            held.append(s)
            time.sleep(0.01)
        print("HELD", flush=True)
        time.sleep(30)
        """, String(adminPort),
      ])
    defer { holder.stop() }
    XCTAssertTrue(holder.wait(for: "HELD"), holder.currentOutput)
    // A probe that had to wait for a slot would meet its own 5 s limit
    // (the slots' request timeout is 10 s): answered is answered at once.
    for probe in 1...5 {
      let health = try Curl.run(["--max-time", "5", "http://127.0.0.1:\(adminPort)/healthz"])
      XCTAssertEqual(health.status, 200, "probe \(probe): \(health.stderr)")
      XCTAssertEqual(health.text, "ok\n")
    }
    let metrics = try Curl.run(["http://127.0.0.1:\(adminPort)/metrics"])
    XCTAssertEqual(metrics.status, 200, metrics.stderr)
  }
}
