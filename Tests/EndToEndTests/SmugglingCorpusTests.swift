import Foundation
import PinTestSupport
import XCTest

/// The request-framing corpus (Tests/Fixtures/smuggling_corpus.py, 170+
/// shapes) through the real binary to a recording origin with its own strict
/// parser (Tests/Fixtures/recording_origin.py): on the forward path and
/// inside intercepted TLS, each shape checks the status the client gets,
/// exactly what the origin parsed, and that two later clients sharing the
/// pooled upstream connection each get their own response.
final class SmugglingCorpusTests: XCTestCase {
  var origin: ChildProcess!
  var proxy: ProxyProcess!
  var originLog = ""

  override func setUpWithError() throws {
    originLog =
      FileManager.default.temporaryDirectory.appendingPathComponent("recording-\(UUID().uuidString).log").path
    FileManager.default.createFile(atPath: originLog, contents: Data())
    origin = try ChildProcessLauncher.python(
      Fixtures.directory + "/recording_origin.py",
      [
        "--cert", Fixtures.path("httpbin-chain.pem"), "--key", Fixtures.path("httpbin.key"), "--log",
        originLog,
      ])
    guard origin.wait(for: "READY "),
      let line = origin.currentOutput.split(separator: "\n").first(where: { $0.hasPrefix("READY") }),
      let originPort = Int(line.split(separator: " ")[1])
    else { throw HarnessError("recording origin did not start: \(origin.currentOutput)") }
    // One loop, so every client of a shape shares the pooled upstream connections.
    proxy = try ProxyProcess(
      config: """
        eventLoops: 1
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
        connectTo: ["httpbin.org:443:127.0.0.1:\(originPort)"]
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny}
        domains:
          - {domain: httpbin.org, anchors: [test]}
        """, listeners: ["forward"], verbose: false)
  }

  override func tearDown() {
    proxy?.stop()
    origin?.stop()
    try? FileManager.default.removeItem(atPath: originLog)
  }

  struct ShapeResult: Decodable {
    let name: String
    let path: String
    let ok: Bool
    let detail: String
  }

  func run(path: String, extra: [String] = []) throws -> [ShapeResult] {
    let output = FileManager.default.temporaryDirectory.appendingPathComponent(
      "corpus-\(UUID().uuidString).json")
    defer { try? FileManager.default.removeItem(at: output) }
    let result = try Subprocess.run(
      "/usr/bin/env",
      [
        "python3", Fixtures.directory + "/smuggling_corpus.py", "--proxy-port",
        String(proxy.ports["forward"]!),
        "--origin-log", originLog, "--path", path, "--json", output.path,
      ] + extra)
    let data = try Data(contentsOf: output)
    let shapes = try JSONDecoder().decode([ShapeResult].self, from: data)
    XCTAssertFalse(shapes.isEmpty, result.stdout + result.stderr)
    return shapes
  }

  func assertAllPass(_ shapes: [ShapeResult], minimum: Int) {
    XCTAssertGreaterThanOrEqual(shapes.count, minimum)
    for shape in shapes where !shape.ok {
      XCTFail("\(shape.path) \(shape.name): \(shape.detail)")
    }
  }

  func testEveryShapeOnTheForwardPath() throws {
    assertAllPass(try run(path: "forward"), minimum: 90)
  }

  func testEveryShapeInsideInterceptedTLS() throws {
    let ca = proxy.directory.appendingPathComponent("state/ca.pem").path
    assertAllPass(try run(path: "intercept", extra: ["--ca", ca]), minimum: 90)
  }
}
