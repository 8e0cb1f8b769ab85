import Foundation
import PinConfig
import PinEventLoop
import XCTest

@testable import PinProxy

#if canImport(Glibc)
  import Glibc
#endif

/// An HTTP origin inside the test process, on PinEventLoop: each complete
/// request head is handed to `script` with its connection's and its own
/// index, on the origin's loop. No curl, no Python.
final class ScriptedOrigin: @unchecked Sendable {
  typealias Script = @Sendable (_ connection: Connection, _ connectionIndex: Int, _ requestIndex: Int) -> Void

  let group = EventLoopGroup(count: 1)
  private(set) var listener: Listener!
  private let lock = NSLock()
  private var connections: [Connection] = []
  private var handlers: [Handler] = []
  private(set) var requestsSeen = 0

  init(script: @escaping Script) throws {
    listener = try Listener(address: SocketAddress(ip: "127.0.0.1", port: 0)!, group: group) {
      [unowned self] fd, peer, loop in
      let connection = Connection(fd: fd, peer: peer.description, loop: loop)
      let index = self.lock.withLock {
        self.connections.append(connection)
        return self.connections.count - 1
      }
      let handler = Handler(index: index, origin: self, script: script)
      self.lock.withLock { self.handlers.append(handler) }
      connection.delegate = handler
      connection.resumeReading()
    }
  }

  var port: Int { listener.address.port }
  var connectionCount: Int { lock.withLock { connections.count } }
  var requestCount: Int { lock.withLock { requestsSeen } }

  func connection(_ index: Int) -> Connection { lock.withLock { connections[index] } }

  /// Runs `work` on the loop of connection `index` and waits for it.
  func onLoop<T>(_ index: Int, _ work: @escaping (Connection) -> T) -> T {
    let connection = self.connection(index)
    nonisolated(unsafe) var result: T?
    connection.loop.queue.sync { result = work(connection) }
    return result!
  }

  func close() { listener.close() }

  fileprivate func sawRequest() { lock.withLock { requestsSeen += 1 } }

  final class Handler: ChannelDelegate, @unchecked Sendable {
    let index: Int
    unowned let origin: ScriptedOrigin
    let script: Script
    var buffer: [UInt8] = []
    var requests = 0

    init(index: Int, origin: ScriptedOrigin, script: @escaping Script) {
      self.index = index
      self.origin = origin
      self.script = script
    }

    func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
      buffer += bytes
      let end = Array("\r\n\r\n".utf8)
      while let range = buffer.firstRange(of: end) {
        buffer.removeSubrange(..<range.upperBound)
        origin.sawRequest()
        script(channel as! Connection, index, requests)
        requests += 1
      }
    }
    func channelDidReadEOF(_ channel: any ByteChannel) {}
    func channelDidDrain(_ channel: any ByteChannel) {}
    func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {}
  }
}

/// A forward session of the real proxy code over one end of a socket pair;
/// the test speaks HTTP on the other end.
final class InProcessProxy {
  let group = EventLoopGroup(count: 1)
  let context: ProxyContext
  let listener: ListenerConfig
  /// The listener as the server binds it: one object for all its
  /// connections (a retired session serves only its own listener's).
  let bound: BoundListener

  init(originPort: Int) throws {
    let text = """
      listeners:
        - name: forward
          address: 127.0.0.1:3128
          mode: forward
          allowedConnectPorts: [\(originPort)]
      domains:
        - domain: 127.0.0.1
          allowsInsecureHTTPLoads: true
      logging:
        access: false
      """
    let configuration = try ConfigurationParser.parse(text, file: "in-process.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    listener = configuration.listeners[0]
    bound = BoundListener(listener)
    context = ProxyContext(
      snapshot: snapshot, group: group, logger: ProxyLogger(minimum: .error, access: false))
  }

  /// A client connected to a new session: the test's end of the pair.
  /// `bound`: another binding of the listener than the proxy's own.
  func connectClient(bound other: BoundListener? = nil) throws -> TestClient {
    let (proxyEnd, clientEnd) = try SocketPair.makeNonBlocking()
    let loop = group.next()
    let context = self.context
    let bound = other ?? self.bound
    loop.execute {
      ProxyServer.accept(
        fd: proxyEnd, peer: SocketAddress(ip: "127.0.0.1", port: 40000)!, loop: loop, listener: bound,
        context: context)
    }
    return TestClient(fd: clientEnd)
  }
}

/// The test's end of a socket pair, read and written with deadlines.
final class TestClient {
  let fd: Int32
  private(set) var received: [UInt8] = []
  private(set) var sawEOF = false

  init(fd: Int32) { self.fd = fd }
  deinit { Glibc.close(fd) }

  var text: String { String(decoding: received, as: UTF8.self) }

  func send(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
      let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if written > 0 { bytes = bytes.dropFirst(written) } else { usleep(1000) }
    }
  }

  /// Reads until `done` holds, EOF, or `timeout` seconds; true when `done` held.
  @discardableResult
  func read(timeout: Double = 10, until done: (TestClient) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    var chunk = [UInt8](repeating: 0, count: 256 * 1024)
    while !done(self) {
      if sawEOF || Date() > deadline { return false }
      var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
      guard poll(&poller, 1, 50) > 0 else { continue }
      let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if count > 0 {
        received += chunk[..<count]
      } else if count == 0 {
        sawEOF = true
      }
    }
    return true
  }

  /// Half-close: the peer reads EOF, and this end can still read.
  func shutdownWrite() { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

  /// Writes what the socket takes now without waiting; returns the count.
  func offer(_ bytes: [UInt8]) -> Int {
    let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    return max(0, written)
  }

  func contains(_ text: String) -> Bool { received.firstRange(of: Array(text.utf8)) != nil }
}

/// Polls `condition` every 5 ms for up to `timeout` seconds.
func waitUntil(timeout: Double = 5, _ condition: () -> Bool) -> Bool {
  let deadline = Date().addingTimeInterval(timeout)
  while Date() < deadline {
    if condition() { return true }
    usleep(5_000)
  }
  return false
}
