import Foundation
import PinTestSupport
import XCTest

extension CTHookTests {
  /// A FIFO at `STATE/ct/unpinned-issuances.json`: the daemon's watch logs
  /// that it cannot read it and goes on (it never waits in `open`), the
  /// hook refuses it at once under its lock; once it is gone, a sighting
  /// the hook records is shown by the same daemon within 10 s.
  func testAFIFOWhereTheSightingsBelongBlocksNeitherTheDaemonNorTheHook() throws {
    _ = try startPinnedDaemon()
    let process = try XCTUnwrap(proxy)
    let sightings = process.directory.appendingPathComponent("state/ct/unpinned-issuances.json").path
    try FileManager.default.createDirectory(
      atPath: (sightings as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    XCTAssertEqual(mkfifo(sightings, 0o600), 0)
    XCTAssertTrue(process.child.wait(for: "ct-sightings-unreadable"), process.log)
    XCTAssertTrue(process.log.contains("it is a FIFO, not a regular file"), process.log)

    try shell(
      """
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout new-ca.key -out new-ca.pem \
        -subj "/CN=New Issuer" -days 30 -addext basicConstraints=critical,CA:TRUE 2>/dev/null
      """)
    try issue("moved", names: ["httpbin.org"], by: ("new-ca.pem", "new-ca.key"))
    let environment = try certspotterEnvironment("moved", names: ["httpbin.org"])
    let refused = try Subprocess.run(
      "/usr/bin/timeout", ["20", Subprocess.pinproxyPath, "ct-hook", "--config", process.configFile],
      environment: environment)
    XCTAssertEqual(refused.status, 2, refused.stdout + refused.stderr)
    XCTAssertTrue(refused.stderr.contains("it is a FIFO, not a regular file"), refused.stderr)

    try FileManager.default.removeItem(atPath: sightings)
    _ = try hook(process.configFile, environment)
    let admin = "http://127.0.0.1:\(process.ports["admin"]!)"
    let shown = try eventually(timeout: 10) {
      let policies =
        try JSONSerialization.jsonObject(with: try Curl.run([admin + "/policies"]).body) as? [String: Any]
      let rule = (policies?["domains"] as? [[String: Any]])?.first
      return (rule?["unpinnedIssuances"] as? [[String: Any]])?.isEmpty == false
    }
    XCTAssertTrue(shown, "the watch must still run: \(process.log)")
  }
}
