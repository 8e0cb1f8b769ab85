import Foundation
import PinEventLoop
import PinHTTP2
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

@testable import PinProxy

/// An HTTP/2 origin inside the test process, for the upstream classes'
/// tests: each connection's server side is a real nghttp2 session
/// (`HTTP2Session` in the `.server` role) on a PinEventLoop loop of its
/// own, so what the proxy's client session sends is parsed, flow-controlled
/// and answered by nghttp2 itself, not by a script that imitates it.
///
/// Two ways in:
/// - `listenTLS()`: a real TLS listener on 127.0.0.1 for the dial path
///   (`UpstreamAcquirer`). The server side is PinTLS's own
///   (`InterceptionContext`, which selects `h2` by ALPN, serving a leaf
///   minted for 127.0.0.1 by a `LocalCA` loaded from the committed test
///   intermediate `int-a`), so a rule anchored at `root-a.pem` trusts it.
///   No Python, no second process: the test can count connections and
///   steer every frame.
/// - `servePair()`: one end of a socket pair served as plain h2, the other
///   returned for an `HTTP2UpstreamConnection` built directly (the trust
///   decision is the dialer's, not under test there).
///
/// `respond` is called on the origin's loop once a request has ended
/// (END_STREAM); it answers through the `OriginH2Connection` it is given.
/// A responder that does nothing leaves the stream open.
final class InProcessH2Origin: @unchecked Sendable {
  typealias Responder = (_ connection: OriginH2Connection, _ stream: Int32, _ request: [HTTP2Header]) -> Void

  let group = EventLoopGroup(count: 1)
  var loop: EventLoop { group.loops[0] }
  /// SETTINGS_MAX_CONCURRENT_STREAMS this origin advertises.
  let maxConcurrentStreams: UInt32
  private let respond: Responder
  private let lock = NSLock()
  private var accepted: [OriginH2Connection] = []
  /// Connections the origin could not set up (no TLS engine or nghttp2
  /// session): closed, so the client under test sees the failure.
  private(set) var setupFailures: [String] = []
  private var listener: Listener?

  init(maxConcurrentStreams: UInt32 = 100, respond: @escaping Responder) {
    self.maxConcurrentStreams = maxConcurrentStreams
    self.respond = respond
  }

  deinit { listener?.close() }

  /// A responder answering every request `200` with `body`.
  static func answering(_ body: [UInt8]) -> Responder {
    { connection, stream, _ in connection.respond(stream: stream, body: body) }
  }

  var connectionCount: Int { lock.withLock { accepted.count } }

  func connection(_ index: Int) -> OriginH2Connection { lock.withLock { accepted[index] } }

  /// Runs `work` on the origin's loop and waits for it.
  func onLoop<T>(_ work: () throws -> T) rethrows -> T { try loop.queue.sync(execute: work) }

  /// Listens on 127.0.0.1 (a kernel-picked port) with TLS and ALPN `h2`; returns the port.
  func listenTLS() throws -> Int {
    let ca = try LocalCA.load(certificate: Fixtures.path("int-a.pem"), key: Fixtures.path("int-a.key"))
    let context = try InterceptionContext(ca: ca, minimumVersion: .tls12, ciphers: "", offersHTTP2: true)
    let leaves = try ca.leaves(for: TrustHost("127.0.0.1")!)
    let listener = try Listener(address: SocketAddress(ip: "127.0.0.1", port: 0)!, group: group) {
      [unowned self] fd, peer, loop in
      loop.execute {
        let connection = Connection(fd: fd, peer: peer.description, loop: loop)
        let channel: TLSChannel
        let origin: OriginH2Connection
        do {
          channel = TLSChannel(connection: connection, engine: try context.makeEngine(presenting: leaves))
          origin = try self.adopt(channel)
        } catch {
          // The acquisition under test then fails and says so; recorded for the test's message.
          self.lock.withLock { self.setupFailures.append("\(error)") }
          return connection.close()
        }
        channel.start(timeout: 10) { result in
          if case .success = result { origin.flush() }
        }
      }
    }
    self.listener = listener
    return listener.address.port
  }

  /// Serves plain h2 on one end of a new socket pair; returns the other end's descriptor.
  func servePair() throws -> Int32 {
    let (originEnd, clientEnd) = try SocketPair.makeNonBlocking()
    try onLoop {
      let connection = Connection(fd: originEnd, peer: "pair", loop: loop)
      try adopt(connection).flush()
      connection.resumeReading()
    }
    return clientEnd
  }

  private func adopt(_ channel: any ByteChannel) throws -> OriginH2Connection {
    let session = try HTTP2Session(role: .server, maxConcurrentStreams: maxConcurrentStreams)
    let connection = OriginH2Connection(channel: channel, session: session, respond: respond)
    lock.withLock { accepted.append(connection) }
    return connection
  }

  func close() {
    listener?.close()
    for connection in lock.withLock({ accepted }) {
      loop.execute { connection.channel.close() }
    }
  }
}

/// One accepted connection of `InProcessH2Origin`: its nghttp2 server
/// session and what the proxy's side did on it. Confined to the origin's
/// loop (read its state through `InProcessH2Origin.onLoop`).
final class OriginH2Connection: ChannelDelegate, @unchecked Sendable {
  let channel: any ByteChannel
  let session: HTTP2Session
  private let respond: InProcessH2Origin.Responder
  /// Request header blocks by stream, as they arrived.
  private(set) var requests: [Int32: [HTTP2Header]] = [:]
  private(set) var isClosed = false
  /// While set, bytes from the proxy are dropped unread: PINGs go unanswered.
  var deaf = false

  init(channel: any ByteChannel, session: HTTP2Session, respond: @escaping InProcessH2Origin.Responder) {
    self.channel = channel
    self.session = session
    self.respond = respond
    channel.delegate = self
  }

  /// `200` (or `status`) with `body` and END_STREAM.
  func respond(stream: Int32, status: Int = 200, body: [UInt8]) {
    try? session.submitResponse(
      stream: stream,
      [HTTP2Header(":status", String(status)), HTTP2Header("content-length", String(body.count))],
      body: body)
    flush()
  }

  /// A response head whose body follows through `sendBody`/`endBody`.
  func respondStreaming(stream: Int32, status: Int = 200) {
    try? session.submitResponse(stream: stream, [HTTP2Header(":status", String(status))], streaming: true)
    flush()
  }

  func sendBody(stream: Int32, _ bytes: [UInt8]) {
    session.sendBody(stream: stream, bytes)
    flush()
  }

  func reset(stream: Int32, code: UInt32) {
    try? session.submitReset(stream: stream, errorCode: code)
    flush()
  }

  /// A GOAWAY frame built by hand (RFC 9113 §6.8), so that it can name a
  /// last stream below one the origin has in fact received: nghttp2's own
  /// always names the last stream it processed.
  func goAway(lastStreamID: Int32, code: UInt32 = HTTP2ErrorCode.noError) {
    flush()
    var frame: [UInt8] = [0, 0, 8, 0x7, 0, 0, 0, 0, 0]
    for value in [UInt32(lastStreamID), code] {
      frame += [
        UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8),
        UInt8(truncatingIfNeeded: value),
      ]
    }
    channel.write(frame)
  }

  /// Hands nghttp2's pending frames to the socket.
  func flush() {
    guard channel.isOpen, let bytes = try? session.pendingOutput(), !bytes.isEmpty else { return }
    channel.write(bytes)
  }

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    guard !deaf else { return }
    guard let events = try? session.receive(bytes) else {
      flush()
      return channel.closeAfterFlush()
    }
    for event in events {
      switch event {
      case .headers(let stream, let block) where requests[stream] == nil:
        requests[stream] = block
      case .data(let stream, let bytes):
        session.consume(stream: stream, bytes.count)
      case .endStream(let stream):
        respond(self, stream, requests[stream] ?? [])
      default:
        break
      }
    }
    // PING acknowledgements and WINDOW_UPDATEs leave here.
    flush()
  }

  func channelDidReadEOF(_ channel: any ByteChannel) { channel.close() }
  func channelDidDrain(_ channel: any ByteChannel) { flush() }
  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) { isClosed = true }
}

extension [HTTP2Header] {
  /// The value of the pseudo-header or field `name`, as text.
  func value(_ name: String) -> String? {
    first { $0.name == [UInt8](name.utf8) }.map { String(decoding: $0.value, as: UTF8.self) }
  }
}
