import Foundation
import PinTestSupport
import XCTest

/// A passthrough tunnel carries only the host it was opened for: the
/// ClientHello's server_name (RFC 6066) must be the CONNECT host or a name
/// the same passthrough entry covers, and a ClientHello without one opens a
/// tunnel only under an entry that allows it. Driven by `openssl s_client
/// -proxy`, as domain fronting would be.
final class PassthroughSNITests: ProxyTestCase {
  /// `openssl s_client` through the proxy to `host`, asking for `name` (or
  /// for no name): its output, and whether the handshake completed.
  func handshake(_ host: String, name: String?) throws -> (established: Bool, output: String) {
    let server = name.map { "-servername \($0)" } ?? "-noservername"
    let result = try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "echo | timeout 15 openssl s_client -brief -proxy 127.0.0.1:\(proxy!.ports["forward"]!)"
          + " -connect \(host):443 \(server) 2>&1",
      ])
    return (result.stdout.contains("CONNECTION ESTABLISHED"), result.stdout)
  }

  func testTheClientHelloMustNameTheHostItsEntryCovers() throws {
    let origin = try origin()
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward, passthrough: ["*.passed.test", {host: legacy.test, allowsMissingSNI: true}]}
        connectTo: ["www.passed.test:443:127.0.0.1:\(origin.port)", "legacy.test:443:127.0.0.1:\(origin.port)"]
        defaults: {action: deny}
        domains: []
        """, listeners: ["forward"])
    for (host, name, opens) in [
      ("www.passed.test", "www.passed.test", true),
      ("www.passed.test", "api.passed.test", true),  // the same *.passed.test entry
      ("www.passed.test", "evil.example", false),  // fronting
      ("www.passed.test", nil, false),  // no name, and the entry does not allow that
      ("legacy.test", nil, true),  // allowsMissingSNI
      ("legacy.test", "www.passed.test", false),  // another entry's name
    ] as [(String, String?, Bool)] {
      let (established, output) = try handshake(host, name: name)
      XCTAssertEqual(established, opens, "CONNECT \(host), SNI \(name ?? "none"): \(output)")
      if !opens {
        XCTAssertTrue(output.lowercased().contains("unrecognized name"), "CONNECT \(host): \(output)")
      }
    }
    XCTAssertTrue(proxy!.child.wait(for: "asks for evil.example, not www.passed.test"), proxy!.log)
    // The last refusal's line, so that all three are written.
    XCTAssertTrue(proxy!.waitForLine { $0.contains("asks for www.passed.test, not legacy.test") }, proxy!.log)
    let refused = proxy!.completeLogLines.filter {
      $0.contains(" refused ") && $0.contains("code=denied-by-policy")
    }
    XCTAssertEqual(refused.count, 3, refused.joined(separator: "\n"))
    XCTAssertTrue(refused.contains { $0.contains("names no host (SNI)") }, refused.joined(separator: "\n"))
  }
}
