import Foundation
import PinTestSupport
import XCTest

/// A SOCKS5 listener under attack and at its edges: thousands of
/// half-finished greetings from several addresses must not lock any
/// listener out, and a CONNECT by IPv6 address reaches an origin on ::1.
extension SocksTests {
  /// Opens `perAddress` connections from each of `addresses` (198.18.x.y
  /// inside the namespace), each sending one SOCKS5 byte and nothing
  /// more; prints HELD once all are open, then holds them.
  static let halfGreetings = """
    import resource, socket, sys, time
    port, addresses, per = int(sys.argv[1]), sys.argv[2].split(","), int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held, failed = [], 0
    for address in addresses:
        for _ in range(per):
            s = socket.socket()
            s.bind((address, 0))
            try:
                s.connect(("198.18.255.254", port))
                s.sendall(b"\\x05")
                held.append(s)
            except OSError:
                failed += 1
                s.close()
    print("HELD %d FAILED %d" % (len(held), failed), flush=True)
    time.sleep(120)
    """

  /// A whole SOCKS5 handshake from `source` asking for a host the policy
  /// denies: prints the method choice and the reply code ("0 2" when the
  /// listener served it), or what went wrong.
  static let socksProbe = """
    import socket, sys
    s = socket.socket()
    s.settimeout(10)
    s.bind((sys.argv[2], 0))
    try:
        s.connect(("198.18.255.254", int(sys.argv[1])))
        s.sendall(b"\\x05\\x01\\x00")
        method = s.recv(2)
        name = b"denied.example"
        s.sendall(b"\\x05\\x01\\x00\\x03" + bytes([len(name)]) + name + b"\\x01\\xbb")
        reply = s.recv(10)
        print("%d %d" % (method[1], reply[1]) if len(method) == 2 and len(reply) >= 2 else "short %r %r" % (method, reply))
    except OSError as error:
        print("error %s" % error)
    """

  /// 4 addresses × 1,024 connections (the default limits: 4,096 in all,
  /// 1,024 per client) each stop after the first greeting byte. A fifth
  /// address is still served by the forward listener (its PAC file) and
  /// by the SOCKS listener itself: each newcomer evicts the longest-waiting
  /// half greeting, as it would a half-sent HTTP head.
  func testHalfGreetingsFromFourAddressesLockNoListenerOut() throws {
    let namespace = try NetworkNamespace.withRoutedBlock(for: self)
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: socks, address: "198.18.255.254:{port:socks}", mode: socks5, allowedClients: ["198.18.0.0/16"]}
          - {name: forward, address: "198.18.255.254:{port:forward}", mode: forward, allowedClients: ["198.18.0.0/16"]}
        defaults: {action: deny}
        domains: []
        """, listeners: ["socks", "forward"], verbose: false, wrapper: NetworkNamespace.wrapper(namespace))
    let forward = proxy!.ports["forward"]!
    let holders = try NetworkNamespace.launch(
      namespace,
      [
        "/usr/bin/python3", "-c", Self.halfGreetings, String(port),
        "198.18.1.1,198.18.1.2,198.18.1.3,198.18.1.4", "1024",
      ])
    defer { holders.stop() }
    XCTAssertTrue(holders.wait(for: "HELD", timeout: 60), holders.currentOutput)
    XCTAssertTrue(holders.currentOutput.contains("HELD 4096 FAILED 0"), holders.currentOutput)
    for probe in 1...5 {
      let pac = try NetworkNamespace.exec(
        namespace,
        [
          "/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10", "--interface",
          "198.18.9.\(probe)", "http://198.18.255.254:\(forward)/proxy.pac",
        ])
      XCTAssertEqual(pac.stdout, "200", "forward probe \(probe): \(pac.stderr)")
      let socks = try NetworkNamespace.exec(
        namespace, ["/usr/bin/python3", "-c", Self.socksProbe, String(port), "198.18.10.\(probe)"])
      XCTAssertEqual(socks.stdout, "0 2\n", "SOCKS probe \(probe): \(socks.stderr)")
    }
    XCTAssertFalse(
      proxy!.log.contains("connection-limit"), "no newcomer was refused: \(proxy!.log.suffix(2000))")
  }

  /// SOCKS5 CONNECT by IPv6 address (ATYP 4): the tunnel opens to `[::1]`
  /// under the rule naming it, and the request inside reaches the origin
  /// listening there.
  func testAConnectByIPv6AddressReachesAnOriginOnIPv6Loopback() throws {
    let origin = try Origin(arguments: ["--bind", "::1"])
    defer { origin.stop() }
    proxy = try ProxyProcess(
      config: """
        listeners:
          - {name: socks, address: "127.0.0.1:{port:socks}", mode: socks5, allowedConnectPorts: [\(origin.port)]}
        anchorSets:
          test: {files: ["\(Fixtures.path("root-a.pem"))"]}
        domains:
          - {domain: "::1", anchors: [test], validatesDomainName: false}
        defaults: {action: deny}
        """, listeners: ["socks"])
    let client = """
      import socket, ssl, sys
      s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=15)
      s.sendall(b"\\x05\\x01\\x00")
      assert s.recv(2) == b"\\x05\\x00"
      s.sendall(b"\\x05\\x01\\x00\\x04" + socket.inet_pton(socket.AF_INET6, "::1") + int(sys.argv[2]).to_bytes(2, "big"))
      reply = s.recv(10)
      print("reply %d" % reply[1], flush=True)
      context = ssl.create_default_context(cafile=sys.argv[3])
      tls = context.wrap_socket(s, server_hostname="::1")
      tls.sendall(b"GET /hello HTTP/1.1\\r\\nHost: [::1]\\r\\nConnection: close\\r\\n\\r\\n")
      answer = b""
      while True:
          chunk = tls.recv(4096)
          if not chunk:
              break
          answer += chunk
      print(answer.decode().split("\\r\\n")[0])
      print(answer.decode().split("\\r\\n\\r\\n", 1)[1])
      """
    let result = try Subprocess.run(
      "/usr/bin/python3", ["-c", client, String(port), String(origin.port), caPath])
    XCTAssertEqual(result.stdout, "reply 0\nHTTP/1.1 200 OK\nhello from origin\n\n", result.stderr)
    XCTAssertTrue(proxy!.child.wait(for: "host=[::1]:\(origin.port)"), proxy!.log)
  }
}
