import Foundation
import PinEventLoop
import PinTestSupport
import XCTest

@testable import PinProxy

/// A tunnel through a real parent proxy: Squid (Debian's `squid-openssl`,
/// Basic credentials checked by `basic_ncsa_auth`) and microsocks (SOCKS5,
/// RFC 1929 credentials), each in front of an echo server on loopback. The
/// tunnel must carry bytes both ways once open; a parent's no must come
/// back as a refusal with its words, a silent or absent parent as a failure.
final class ParentDialTests: XCTestCase {
  var children: [Process] = []
  var directory = ""

  override func setUpWithError() throws {
    directory = NSTemporaryDirectory() + "parent-dial-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    // Squid drops to its own user: it must read its password file and write its logs here.
    chmod(directory, 0o777)
  }

  override func tearDown() {
    for child in children where child.isRunning {
      child.terminate()
      child.waitUntilExit()
    }
    try? FileManager.default.removeItem(atPath: directory)
  }

  func launch(_ path: String, _ arguments: [String]) throws -> Process {
    XCTAssertTrue(FileManager.default.isExecutableFile(atPath: path), "\(path) is not installed")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle(forWritingAtPath: "/dev/null")
    try process.run()
    children.append(process)
    return process
  }

  func waitForListener(_ port: Int) throws {
    for _ in 0..<200 {
      if OpenSSLServer.canConnect(port: port) { return }
      usleep(25_000)
    }
    throw NSError(
      domain: "ParentDialTests", code: 1, userInfo: [NSLocalizedDescriptionKey: "nothing on \(port)"])
  }

  /// Answers each connection's first bytes with `echo:` and them.
  func startEcho() throws -> Int {
    let port = try OpenSSLServer.freePort()
    _ = try launch(
      "/usr/bin/python3",
      [
        "-c",
        """
        import socket
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", \(port))); s.listen()
        while True:
            c, _ = s.accept(); data = c.recv(100); c.sendall(b"echo:" + data); c.close()
        """,
      ])
    try waitForListener(port)
    return port
  }

  func startMicrosocks(user: String? = nil, password: String? = nil) throws -> Int {
    let socks = try SocksParent(user: user, password: password)
    addTeardownBlock { socks.stop() }
    return socks.port
  }

  /// Squid requiring Basic credentials (alice / wonderland), CONNECT to any port.
  func startSquid() throws -> Int {
    let squid = try SquidParent(user: "alice", password: "wonderland")
    addTeardownBlock { squid.stop() }
    return squid.port
  }

  /// Reads what comes through an open tunnel.
  final class Reader: ChannelDelegate, @unchecked Sendable {
    var bytes: [UInt8] = []
    let closed = DispatchSemaphore(value: 0)
    func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
      self.bytes += bytes
    }
    func channelDidReadEOF(_ channel: any ByteChannel) { channel.close() }
    func channelDidDrain(_ channel: any ByteChannel) {}
    func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) { closed.signal() }
  }

  /// Dials the parent on `parentPort`, asks for `host:port` and, once open,
  /// sends `hello` through the tunnel: the outcome, and what came back.
  func dial(
    parent parentPort: Int, _ kind: ParentTunnel.Kind, to port: Int, host: String = "127.0.0.1",
    credentials: ParentTunnel.Credentials? = nil, timeout: Double = 10
  ) -> (outcome: String, echoed: String) {
    let loop = EventLoop(name: "parent-dial")
    let done = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var outcome = ""
    let reader = Reader()
    loop.execute {
      Connector.connect(
        to: [SocketAddress(ip: "127.0.0.1", port: parentPort)!], on: loop, timeout: timeout
      ) { connected in
        guard case .success(let fd) = connected else {
          outcome = "no connection"
          _ = done.signal()
          return
        }
        let connection = Connection(fd: fd, peer: "parent", loop: loop)
        let tunnel = ParentTunnel(kind: kind, host: host, port: port, credentials: credentials)
        ParentDial(connection: connection, tunnel: tunnel) { result in
          switch result {
          case .open(let connection):
            outcome = "open"
            connection.delegate = reader
            connection.write(Array("hello".utf8))
            connection.resumeReading()
          case .refused(let reason):
            outcome = "refused: " + reason
            _ = reader.closed.signal()
          case .failed(let reason):
            outcome = "failed: " + reason
            _ = reader.closed.signal()
          }
          _ = done.signal()
        }.start(timeout: timeout)
      }
    }
    XCTAssertEqual(done.wait(timeout: .now() + timeout + 5), .success, "the dial never ended")
    XCTAssertEqual(reader.closed.wait(timeout: .now() + 10), .success, "the tunnel never closed")
    return (outcome, loop.runAndWait { String(decoding: reader.bytes, as: UTF8.self) })
  }

  let alice = ParentTunnel.Credentials(user: Array("alice".utf8), password: Array("wonderland".utf8))

  func testASocks5ParentCarriesTheTunnelWithAndWithoutCredentials() throws {
    let echo = try startEcho()
    let open = try startMicrosocks()
    XCTAssertEqual(dial(parent: open, .socks5, to: echo).outcome, "open")
    XCTAssertEqual(dial(parent: open, .socks5, to: echo).echoed, "echo:hello")

    let guarded = try startMicrosocks(user: "alice", password: "wonderland")
    let through = dial(parent: guarded, .socks5, to: echo, credentials: alice)
    XCTAssertEqual(through.outcome, "open")
    XCTAssertEqual(through.echoed, "echo:hello")
    XCTAssertEqual(
      dial(parent: guarded, .socks5, to: echo).outcome,
      "refused: no acceptable authentication method (it wants credentials)")
    let wrong = ParentTunnel.Credentials(user: Array("alice".utf8), password: Array("wrong".utf8))
    XCTAssertEqual(
      dial(parent: guarded, .socks5, to: echo, credentials: wrong).outcome,
      "refused: the username and password were refused")
    // The parent cannot reach the target: its reply says so.
    let closedPort = try OpenSSLServer.freePort()
    XCTAssertTrue(
      dial(parent: open, .socks5, to: closedPort).outcome.hasPrefix("refused: SOCKS5 reply"),
      "a target the parent cannot reach")
  }

  func testSquidAsTheParentChecksBasicCredentialsAndCarriesTheTunnel() throws {
    let echo = try startEcho()
    let squid = try startSquid()
    let through = dial(parent: squid, .http, to: echo, credentials: alice)
    XCTAssertEqual(through.outcome, "open")
    XCTAssertEqual(through.echoed, "echo:hello")
    XCTAssertEqual(dial(parent: squid, .http, to: echo).outcome, "refused: 407 Proxy Authentication Required")
    let wrong = ParentTunnel.Credentials(user: Array("alice".utf8), password: Array("queen".utf8))
    XCTAssertEqual(
      dial(parent: squid, .http, to: echo, credentials: wrong).outcome,
      "refused: 407 Proxy Authentication Required")
    // Squid cannot reach the target: a 503 with its words, not a tunnel.
    let closedPort = try OpenSSLServer.freePort()
    XCTAssertTrue(
      dial(parent: squid, .http, to: closedPort, credentials: alice).outcome.hasPrefix("refused: 503"),
      "a target the parent cannot reach")
  }

  func testAParentThatNeverAnswersFailsAtTheDeadline() throws {
    // A listener that accepts and says nothing.
    let port = try OpenSSLServer.freePort()
    _ = try launch(
      "/usr/bin/python3",
      [
        "-c",
        """
        import socket, time
        s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", \(port))); s.listen(); held = []
        while True:
            c, _ = s.accept(); held.append(c)
        """,
      ])
    try waitForListener(port)
    let started = Date()
    let result = dial(parent: port, .http, to: 443, host: "origin.test", timeout: 1)
    XCTAssertEqual(result.outcome, "failed: no answer within 1.0 s")
    XCTAssertLessThan(Date().timeIntervalSince(started), 5)
  }
}
