import Foundation
import PinTestSupport
import XCTest

/// What a client or a configuration could slip into the PAC file: a `Host`
/// field naming another proxy (cached by browsers for five minutes) and a
/// listener name that would end the file's comment.
extension PACTests {
  /// A listener on every address names the address the client reached in
  /// its `PROXY` line, whatever the `Host` field says, and pacparser reads
  /// that address back.
  func testTheProxyLineNamesTheAddressReachedNotTheHostField() throws {
    let origin = try origin()
    let listener = #"address: "127.0.0.1:{port:forward}""#
    let everyAddress = #"address: "0.0.0.0:{port:forward}", allowedClients: ["127.0.0.0/8"]"#
    proxy = try ProxyProcess(
      config: config(origin).replacingOccurrences(of: listener, with: everyAddress), listeners: ["forward"])
    for (target, host) in [("127.0.0.1", "evil.example:8080"), ("127.0.0.2", "10.9.9.9:3128")] {
      let served = try Curl.run(["-H", "Host: \(host)", "http://\(target):\(port)/proxy.pac"])
      XCTAssertEqual(served.status, 200, served.text)
      XCTAssertTrue(served.text.contains("\"PROXY \(target):\(port)\""), served.text)
      XCTAssertFalse(served.text.contains(host.split(separator: ":")[0]), served.text)
      let file = FileManager.default.temporaryDirectory.appendingPathComponent("pac-\(UUID().uuidString).js")
      try served.text.write(to: file, atomically: true, encoding: .utf8)
      defer { try? FileManager.default.removeItem(at: file) }
      XCTAssertEqual(try pacparser(file.path, ["https://api.test/"]), ["PROXY \(target):\(port)"])
    }
  }

  /// A listener name with a line break (which would have ended the file's
  /// `//` comment and let the next line redefine FindProxyForURL) is
  /// refused by `check`, naming the key.
  func testAListenerNameThatWouldBreakOutOfTheCommentIsRefused() throws {
    let origin = try origin()
    let name = #""x\nFindProxyForURL = function(u, h) { return 'PROXY evil.example:1'; }\n""#
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("pac-\(UUID().uuidString).yaml")
    try config(origin).replacingOccurrences(of: "name: forward", with: "name: \(name)")
      .replacingOccurrences(of: "{port:forward}", with: "3128")
      .write(to: file, atomically: true, encoding: .utf8)
    defer { try? FileManager.default.removeItem(at: file) }
    let result = try Subprocess.pinproxy(["check", "--config", file.path])
    XCTAssertEqual(result.status, 2, result.stdout)
    XCTAssertTrue(
      result.stderr.contains(
        "listeners[0].name: a listener name is one non-empty line without control characters"),
      result.stderr)
  }
}
