import Foundation
import PinTestSupport
import XCTest

/// Origins and a proxy started per test, stopped after it.
class ProxyTestCase: XCTestCase {
  var origins: [Origin] = []
  var proxy: ProxyProcess?

  override func tearDown() {
    proxy?.stop()
    origins.forEach { $0.stop() }
  }

  func origin(_ name: String = "httpbin", _ arguments: [String] = []) throws -> Origin {
    let origin = try Origin(name, arguments: arguments)
    origins.append(origin)
    return origin
  }

  /// Starts the proxy with the test root as anchor set `test`, the given
  /// hosts mapped to origins, and the given domain rules.
  func startProxy(
    map: [String: Origin], domains: String, extra: String = "", listeners: String = "", names: [String] = [],
    closedPorts: [String: Int] = [:], wrapper: [String] = []
  ) throws -> Int {
    let mapping = map.mapValues(\.port).merging(closedPorts) { $1 }
    let connectTo = mapping.map { "\"\($0.key):443:127.0.0.1:\($0.value)\"" }.joined(separator: ", ")
    let config = """
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      \(listeners)
      connectTo: [\(connectTo)]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      defaults: {action: deny}
      \(extra)
      domains:
      \(domains)
      """
    let process = try ProxyProcess(config: config, listeners: ["forward"] + names, wrapper: wrapper)
    proxy = process
    return process.ports["forward"]!
  }

  static let forwardListener = #"  - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}"#

  /// A configuration text: `top` first, then the listeners (one forward
  /// listener unless given), httpbin.org mapped to `origin`, the test root as
  /// anchor set `test`, and one rule for httpbin.org.
  func httpbinConfig(_ origin: Origin, top: String = "", listeners: String = forwardListener) -> String {
    """
    \(top)
    listeners:
    \(listeners)
    connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)"]
    anchorSets:
      test: {files: ["\(Fixtures.path("root-a.pem"))"]}
    domains:
      - {domain: httpbin.org, anchors: [test]}
    """
  }

  /// keepalive_client.py through the running proxy's forward listener: a
  /// first request, then `reload` rewrites the configuration, SIGHUP, and a
  /// second request on the same connection (HTTP/1.1 absolute-form, or h2
  /// inside a CONNECT). Returns their `N status code` lines.
  func requestsAcross(reload config: String, h2: Bool) throws -> (first: String, second: String) {
    let go = proxy!.directory.appendingPathComponent("go").path
    let ca = proxy!.directory.appendingPathComponent("state/ca.pem").path
    let client = try ChildProcessLauncher.python(
      Fixtures.directory + "/keepalive_client.py",
      ["--proxy", String(proxy!.ports["forward"]!), "--host", "httpbin.org", "--path", "/hello", "--go", go]
        + (h2 ? ["--h2", "--ca", ca] : []))
    defer { client.stop() }
    XCTAssertTrue(client.wait(for: "1 ", timeout: 15), client.currentOutput)
    try proxy!.rewrite(config: config)
    proxy!.child.signal(SIGHUP)
    XCTAssertTrue(proxy!.child.wait(for: "reload-ok"), proxy!.log)
    FileManager.default.createFile(atPath: go, contents: Data())
    XCTAssertTrue(client.wait(for: "2 ", timeout: 15), client.currentOutput)
    let lines = client.currentOutput.split(separator: "\n").map(String.init)
    return (lines.first { $0.hasPrefix("1 ") } ?? "", lines.first { $0.hasPrefix("2 ") } ?? "")
  }

  /// An admin listener, a forward listener named `forward` on `host` with
  /// `options`, httpbin.org allowed (its origin behind `connectTo`; a new
  /// one unless given), everything else denied; `top` first.
  func adminAndHttpbinOnly(
    listener options: String, host: String = "127.0.0.1", top: String = "", origin: Origin? = nil
  ) throws -> String {
    try httpbinOnly(
      listeners:
        "  - {name: forward, address: \"\(host):{port:forward}\", mode: forward\(options.isEmpty ? "" : ", " + options)}",
      top: "admin: {address: \"127.0.0.1:{port:admin}\"}\n" + top, origin: origin)
  }

  /// `listeners` (YAML list entries), httpbin.org allowed (its origin behind
  /// `connectTo`; a new one unless given), everything else denied; `top` first.
  func httpbinOnly(listeners: String, top: String = "", origin: Origin? = nil) throws -> String {
    httpbinConfig(try origin ?? self.origin(), top: top + "\ndefaults: {action: deny}", listeners: listeners)
  }

  /// Waits until `condition` holds (polling), false after `timeout`.
  func eventually(timeout: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if try condition() { return true }
      usleep(50_000)
    }
    return try condition()
  }

  func get(_ url: String, through port: Int, _ extra: [String] = []) throws -> CurlResult {
    try Curl.run(["-x", "http://127.0.0.1:\(port)", url] + extra)
  }

  func assertRefused(
    _ result: CurlResult, _ status: Int, _ code: String, file: StaticString = #filePath, line: UInt = #line
  ) {
    XCTAssertEqual(result.status, status, result.text, file: file, line: line)
    XCTAssertEqual(result.pinproxyError, code, result.text, file: file, line: line)
    XCTAssertTrue(result.text.hasPrefix("pinproxy: \(code): "), result.text, file: file, line: line)
  }
}
