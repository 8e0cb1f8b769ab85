import Foundation
import PinTestSupport
import XCTest

/// The SOCKS5 reply to a CONNECT whose host nothing listens on: the dial's
/// own outcome (the target reset the connection) decides it, not the words
/// of the refusal's reason.
extension SocksTests {
  /// A passthrough host mapped to a port bound and never listened on: the
  /// dial is refused (ECONNREFUSED), the client gets 0x05 (connection
  /// refused, RFC 1928 §6), and the operator's line keeps the code
  /// `upstream-unreachable`.
  func testAConnectToAPortNothingListensOnGetsConnectionRefused() throws {
    let closed = try OpenSSLServer.closedPort()
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: socks, address: "127.0.0.1:{port:socks}", mode: socks5, passthrough: ["down.test"]}
        connectTo: ["down.test:443:127.0.0.1:\(closed)"]
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        defaults: {action: deny}
        domains:
          - {domain: down.test, anchors: [test]}
        """,
      listeners: ["socks"])
    let script = """
      import socket, sys
      s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
      s.sendall(bytes([5, 1, 0]))
      assert s.recv(2) == bytes([5, 0])
      s.sendall(bytes([5, 1, 0, 3, 9]) + b"down.test" + bytes([1, 187]))
      reply = s.recv(10)
      print(reply[1] if len(reply) >= 2 else -1)
      """
    let result = try Subprocess.run("/usr/bin/python3", ["-c", script, String(port)])
    XCTAssertEqual(result.stdout, "5\n", result.stderr)
    XCTAssertTrue(
      proxy!.waitForLine { $0.contains("code=upstream-unreachable") && $0.contains("down.test") }, proxy!.log)
  }
}
