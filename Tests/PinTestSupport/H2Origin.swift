import Foundation

/// Tests/Fixtures/h2_origin.py: a TLS HTTP/2-only origin (Python's `h2`)
/// under the httpbin.org test leaf, logging each connection and request.
public final class H2Origin {
  public let port: Int
  public let log: String
  let child: ChildProcess

  /// - Parameters:
  ///   - goAwayFirst: its first connection answers GOAWAY (last stream 0).
  ///   - silentAfterFirst: a connection goes silent after its first response.
  ///   - script: the origin script in Tests/Fixtures (`h2_hostile_origin.py` answers by path with hostile shapes).
  public init(goAwayFirst: Bool = false, silentAfterFirst: Bool = false, script: String = "h2_origin.py")
    throws
  {
    log =
      FileManager.default.temporaryDirectory.appendingPathComponent("h2-origin-\(UUID().uuidString).log").path
    child = try ChildProcessLauncher.python(
      Fixtures.directory + "/" + script,
      ["--cert", Fixtures.path("httpbin-chain.pem"), "--key", Fixtures.path("httpbin.key"), "--log", log]
        + (goAwayFirst ? ["--goaway-first"] : []) + (silentAfterFirst ? ["--silent-after-first"] : []))
    guard child.wait(for: "READY "),
      let line = child.currentOutput.split(separator: "\n").first(where: { $0.hasPrefix("READY") }),
      let port = Int(line.split(separator: " ")[1])
    else { throw HarnessError("h2_origin.py did not start: \(child.currentOutput)") }
    self.port = port
  }

  deinit { stop() }

  /// What it logged: `connection N` and `request N PATH` lines.
  public var lines: [String] {
    (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
  }

  public func stop() { child.stop() }
}
