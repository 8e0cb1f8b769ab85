import Foundation
import PinTestSupport
import XCTest

/// Reload, graceful shutdown and systemd notification on the real binary.
final class OperationsTests: ProxyTestCase {
  func config(originPort: Int, pinned: String? = nil, extra: String = "") -> String {
    let pinning = pinned.map { ", pinningMode: publicKey, pinnedPublicKeyHashes: [\"\($0)\"]" } ?? ""
    return """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["httpbin.org:443:127.0.0.1:\(originPort)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      \(extra)
      domains:
        - {domain: httpbin.org, anchors: [test]\(pinning)}
      """
  }

  func get(_ path: String) throws -> CurlResult {
    try Curl.run(["-x", "http://127.0.0.1:\(proxy!.ports["forward"]!)", "http://httpbin.org\(path)"])
  }

  func testGoodReloadChangesNewRequestsWhileADownloadInFlightCompletes() throws {
    let origin = try origin()
    proxy = try ProxyProcess(config: config(originPort: origin.port), listeners: ["forward"])
    let port = proxy!.ports["forward"]!
    let download = try BackgroundCommand(
      "/usr/bin/curl",
      [
        "-s", "-x", "http://127.0.0.1:\(port)", "--limit-rate", "4M", "-o", "/dev/null", "-w",
        "%{http_code} %{size_download}",
        "http://httpbin.org/bytes/12000000",
      ])
    XCTAssertTrue(
      origin.waitForRequest("GET /bytes/12000000"), "the download must be under way before the reload")
    try proxy!.rewrite(
      config: config(originPort: origin.port, pinned: Fixtures.certificate("adn.pem").spkiPin))
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    let after = try get("/hello")
    XCTAssertEqual(after.status, 502)
    XCTAssertEqual(after.pinproxyError, "pin-mismatch", "the new rule applies to new requests")
    let (status, output) = download.finish()
    XCTAssertEqual(status, 0)
    XCTAssertEqual(output, "200 12000000", "the download that started before the reload completes")
  }

  func testBadReloadKeepsTheRunningConfigurationAndLogsEveryError() throws {
    let origin = try origin()
    proxy = try ProxyProcess(config: config(originPort: origin.port), listeners: ["forward"])
    try proxy!.rewrite(
      config: config(originPort: origin.port)
        + "\n  - {domain: broken.example, pinningMode: sideways, colour: red}\n")
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-failed"), proxy!.log)
    // Each error is its own line after reload-failed: wait for each.
    XCTAssertTrue(
      proxy!.child.wait(for: "domains[1].pinningMode: \\\"sideways\\\" is not one of"), proxy!.log)
    XCTAssertTrue(proxy!.child.wait(for: "domains[1].colour: unknown key"), proxy!.log)
    XCTAssertEqual(try get("/hello").status, 200, "still serving the old configuration")
  }

  func testSIGTERMLetsASlowResponseFinishAndRefusesNewConnections() throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: config(originPort: origin.port, extra: "timeouts: {drain: 10s}"), listeners: ["forward"])
    let port = proxy!.ports["forward"]!
    let slow = try BackgroundCommand(
      "/usr/bin/curl",
      ["-s", "-x", "http://127.0.0.1:\(port)", "-w", " %{http_code}", "http://httpbin.org/slow/2"])
    XCTAssertTrue(origin.waitForRequest("GET /slow/2"), "the slow request must be in flight")
    let started = Date()
    proxy!.child.signal(SIGTERM)
    XCTAssertTrue(proxy!.child.wait(for: "draining"), proxy!.log)
    XCTAssertNil(Loopback.connect(port: port), "no new connections while draining")
    let (_, output) = slow.finish()
    XCTAssertEqual(output, "slow\n 200")
    XCTAssertTrue(proxy!.child.wait(for: "stopped"), proxy!.log)
    proxy!.child.waitForExit()
    XCTAssertEqual(proxy!.child.exitStatus, 0)
    XCTAssertLessThan(
      Date().timeIntervalSince(started), 9.5, "the drain ends with the response, not the 10 s deadline")
  }

  func testSystemdNotificationsAroundStartReloadAndStop() throws {
    let origin = try origin()
    let notify = try NotifySocket()
    proxy = try ProxyProcess(
      config: config(originPort: origin.port), listeners: ["forward"],
      environment: ["NOTIFY_SOCKET": notify.path])
    var messages = notify.messages { $0.contains { $0.hasPrefix("READY=1") } }
    XCTAssertTrue(messages.contains { $0.hasPrefix("READY=1\nSTATUS=serving") }, "\(messages)")
    proxy!.child.signal(SIGHUP)
    messages = notify.messages { $0.count >= 2 }
    XCTAssertTrue(messages.first?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") ?? false, "\(messages)")
    XCTAssertTrue(
      messages.last?.hasPrefix("READY=1\nSTATUS=serving, configuration generation 2") ?? false, "\(messages)")
    proxy!.child.signal(SIGTERM)
    messages = notify.messages { !$0.isEmpty }
    XCTAssertTrue(messages.first?.hasPrefix("STOPPING=1") ?? false, "\(messages)")
  }
}
