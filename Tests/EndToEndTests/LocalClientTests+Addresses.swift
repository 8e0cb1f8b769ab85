import Foundation
import PinTestSupport
import XCTest

/// A local process is a local client whatever addresses it uses: one that
/// binds its source to one of this host's own addresses and connects to
/// another of them (or to 127.0.0.1) is asked of the kernel like a loopback
/// client, so `allowedUsers` governs it on a listener that also takes
/// other hosts. In a namespace whose loopback answers for 198.18.0.0/16.
extension LocalClientTests {
  /// A LAN-facing listener (every address, 198.18.0.0/16 and loopback
  /// allowed) that only root may use from this host.
  func startOnEveryAddress(_ namespace: String) throws {
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: forward, address: "0.0.0.0:{port:forward}", mode: forward, allowedClients: ["198.18.0.0/16", "127.0.0.0/8"], allowedUsers: [root]}
        defaults: {action: deny}
        domains: []
        """, listeners: ["forward"], wrapper: NetworkNamespace.wrapper(namespace))
  }

  /// The PAC file through the listener at `target`, fetched by `uid` from
  /// `source` inside the namespace: the HTTP status, or 000 when closed unread.
  func pac(_ namespace: String, as uid: String, from source: String, to target: String) throws -> String {
    let command = try asUser(
      uid,
      [
        "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "--interface",
        source,
        "http://\(target):\(port)/proxy.pac",
      ])
    return try NetworkNamespace.exec(namespace, command).stdout
  }

  /// nobody from 198.18.0.1 to 198.18.0.2, to 127.0.0.1, and to 198.18.0.1
  /// itself: each closed at accept as a local client of a user the listener
  /// does not list; root from the same address to the same places is served.
  func testAHostAddressOtherThanLoopbackIsStillALocalClient() throws {
    let namespace = try NetworkNamespace.withRoutedBlock(for: self)
    try startOnEveryAddress(namespace)
    for target in ["198.18.0.2", "127.0.0.1", "198.18.0.1"] {
      XCTAssertEqual(try pac(namespace, as: "0", from: "198.18.0.1", to: target), "200", "root to \(target)")
      XCTAssertEqual(
        try pac(namespace, as: Self.nobody, from: "198.18.0.1", to: target), "000", "nobody to \(target)")
    }
    XCTAssertTrue(proxy!.child.wait(for: "client_user=nobody"), proxy!.log)
    let refused = logLines("client-refused")
    XCTAssertTrue(
      refused.contains { $0.contains("client=198.18.0.1:") && $0.contains("user not in allowedUsers") },
      refused.joined(separator: "\n"))
  }
}
