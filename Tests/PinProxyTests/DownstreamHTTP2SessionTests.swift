import Foundation
import PinConfig
import PinEventLoop
import PinHTTP2
import PinTrust
import XCTest

@testable import PinProxy

/// The real `DownstreamHTTP2Session` on one end of a socket pair, as if an
/// intercepted CONNECT to `origin.test` had settled on h2; the test's
/// nghttp2 client speaks on the other end. The tunnel is plain and the rule
/// allows insecure loads, so each stream goes over HTTP/1.1 without TLS to
/// a `HeldOrigin` in the process (through `connectTo`). One scenario per test.
final class DownstreamHTTP2SessionTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  lazy var group = EventLoopGroup(count: 1)

  /// A parallel run ends the test's process as soon as the test returns.
  /// The loop first finishes what the test set going (a session closing
  /// after a GOAWAY lets go of its streams and its nghttp2 session): a
  /// process that exits while its loop is mid-teardown can crash in exit's
  /// clean-up. A signal 11 at the end of this class's longest teardown,
  /// seen twice in full parallel suites and never in hundreds of runs of
  /// the test alone, fits that.
  override func tearDown() {
    let loop = group.next()
    for _ in 0..<3 { loop.runAndWait {} }
  }

  struct Proxy {
    let session: DownstreamHTTP2Session
    let client: HTTP2TestClient
    let loop: EventLoop
  }

  /// A session admitted as `ProxyServer.accept` and the forward session's
  /// hand-over would leave it, serving `origin.test:PORT` through the tunnel.
  func connect(to port: Int) throws -> Proxy {
    let text = """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward}
      connectTo: ["origin.test:\(port):127.0.0.1:\(port)"]
      domains:
        - {domain: origin.test, allowsInsecureHTTPLoads: true}
      logging:
        access: false
      """
    let configuration = try ConfigurationParser.parse(text, file: "h2-session.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    let context = ProxyContext(
      snapshot: snapshot, group: group, logger: ProxyLogger(minimum: .error, access: false))
    let listener = configuration.listeners[0]
    let tunnel = ConnectTarget(host: try XCTUnwrap(TrustHost("origin.test")), port: port, plain: true)
    let (proxyEnd, clientEnd) = try SocketPair.makeNonBlocking()
    let client = try HTTP2TestClient(fd: clientEnd)
    let loop = group.next()
    let session = try loop.runAndWait { () throws -> DownstreamHTTP2Session in
      let peer = "127.0.0.1:40000"
      let connection = Connection(fd: proxyEnd, peer: peer, loop: loop)
      let (_, entry) = context.admission.admit(client: peer, remembered: nil, limits: snapshot.limits) { _ in
        false
      }
      let ticket = AdmissionTicket(admission: context.admission, entry: try XCTUnwrap(entry))
      connection.onClose = ticket.release
      let session = try DownstreamHTTP2Session(
        client: connection, context: context, snapshot: snapshot, listener: listener, tunnel: tunnel,
        pool: context.pool(for: loop), admission: ticket, origin: ClientOrigin(peer: peer, local: nil))
      session.start()
      connection.resumeReading()
      return session
    }
    return Proxy(session: session, client: client, loop: loop)
  }

  func testTwoStreamsAreAnsweredIndependently() throws {
    let origin = try HeldOrigin(holdingFirst: 1)
    defer { origin.close() }
    let proxy = try connect(to: origin.port)
    let client = proxy.client
    let slow = try client.request("/slow")
    XCTAssertTrue(client.pump { _ in origin.heldCount == 1 }, "the first stream reached the origin")
    let fast = try client.request("/fast")
    XCTAssertTrue(client.pump { $0.ended(fast) }, "\(client.events)")
    XCTAssertEqual(client.status(fast), "200")
    XCTAssertEqual(client.blocks(fast).first?[field: "via"], "1.1 pinproxy")
    XCTAssertEqual(client.body(fast), "ok")
    XCTAssertTrue(client.blocks(slow).isEmpty, "the held stream has no answer yet")

    origin.release()
    XCTAssertTrue(client.pump { $0.ended(slow) }, "\(client.events)")
    XCTAssertEqual(client.status(slow), "200")
    XCTAssertEqual(client.body(slow), "late")
  }

  func testClientCancelledExchangesPastTheResetBucketEndTheConnection() throws {
    let origin = try HeldOrigin(holdingFirst: 0)
    defer { origin.close() }
    let proxy = try connect(to: origin.port)
    let client = proxy.client
    // Fewer than nghttp2's own reset limit (200), more than ours (100, then 10/s).
    try cancelHeldUploads(160, on: client)
    XCTAssertTrue(client.pump { $0.goAwayCode != nil && $0.sawEOF }, "\(client.events.suffix(5))")
    XCTAssertEqual(client.goAwayCode, HTTP2ErrorCode.enhanceYourCalm)
    XCTAssertTrue(client.sawEOF, "the connection ends after the GOAWAY")
    XCTAssertEqual(origin.requestCount, 0, "no held body ever went upstream")
  }

  func testCancelledExchangesWithinTheResetBucketKeepTheConnection() throws {
    let origin = try HeldOrigin(holdingFirst: 0)
    defer { origin.close() }
    let proxy = try connect(to: origin.port)
    let client = proxy.client
    try cancelHeldUploads(80, on: client)
    let after = try client.request("/after")
    XCTAssertTrue(client.pump { $0.ended(after) }, "\(client.events.suffix(5))")
    XCTAssertEqual(client.body(after), "ok")
    XCTAssertNil(client.goAwayCode)
  }

  /// Opens `count` streams that each declare a small body and never send
  /// it (the proxy holds them without going upstream), and cancels each:
  /// an exchange the client started and gave up, in batches of 20.
  func cancelHeldUploads(_ count: Int, on client: HTTP2TestClient) throws {
    for _ in 0..<(count / 20) {
      let streams = try (0..<20).map { _ in
        try client.request("/upload", method: "POST", [.init("content-length", "10")], streaming: true)
      }
      for stream in streams {
        try client.session.submitReset(stream: stream, errorCode: HTTP2ErrorCode.cancel)
      }
      try client.flush()
      client.readAvailable(waitMilliseconds: 0)
      if client.goAwayCode != nil { return }
    }
  }

  func testAtMost32StreamsHoldAnUpstreamAndTheRestFollowAsSlotsFree() throws {
    let origin = try HeldOrigin()
    defer { origin.close() }
    let proxy = try connect(to: origin.port)
    let client = proxy.client
    // `DownstreamHTTP2Session.maxUpstreamExchanges`, the documented bound:
    // written out so that a changed constant fails here.
    let limit = 32
    let streams = try (0..<(limit + 8)).map { try client.request("/\($0)") }
    XCTAssertTrue(client.pump { _ in origin.heldCount >= limit }, "held \(origin.heldCount)")
    // Time for any stream past the limit to reach the origin, if it could.
    client.pump(timeout: 0.5) { _ in false }
    XCTAssertEqual(origin.requestCount, limit, "the streams past the limit wait for a slot")
    XCTAssertTrue(streams.allSatisfy { client.blocks($0).isEmpty }, "nothing answered while all are held")

    origin.release()
    XCTAssertTrue(
      client.pump { client in streams.allSatisfy { client.ended($0) } }, "\(client.events.suffix(5))")
    XCTAssertEqual(origin.requestCount, limit + 8)
    for stream in streams { XCTAssertEqual(client.status(stream), "200", "stream \(stream)") }
    let bodies = streams.map { client.body($0) }
    XCTAssertEqual(bodies.filter { $0 == "late" }.count, limit, "the held ones")
    XCTAssertEqual(bodies.filter { $0 == "ok" }.count, 8, "the queued ones, once slots came free")
  }

  func testARefusedStreamIsAnsweredOnItsOwnWhileAnotherSucceeds() throws {
    let origin = try HeldOrigin(holdingFirst: 0)
    defer { origin.close() }
    let proxy = try connect(to: origin.port)
    let client = proxy.client
    let long = try client.request("/" + String(repeating: "a", count: 9000))
    let plainScheme = try client.session.submitRequest([
      .init(":method", "GET"), .init(":scheme", "http"), .init(":authority", "origin.test"),
      .init(":path", "/"),
    ])
    try client.flush()
    let good = try client.request("/fine")
    XCTAssertTrue(client.pump { [long, plainScheme, good].allSatisfy($0.ended) }, "\(client.events)")

    let refused = try XCTUnwrap(client.blocks(long).first)
    XCTAssertEqual(refused[field: ":status"], "414")
    XCTAssertEqual(refused[field: "pinproxy-error"], "bad-request")
    XCTAssertTrue(
      client.body(long).hasPrefix("pinproxy: bad-request: request target longer than 8192 bytes\nincident: "),
      client.body(long))
    XCTAssertEqual(client.status(plainScheme), "400")
    XCTAssertEqual(client.blocks(plainScheme).first?[field: "pinproxy-error"], "bad-request")
    XCTAssertTrue(client.body(plainScheme).contains(":scheme must be https"), client.body(plainScheme))

    XCTAssertEqual(client.status(good), "200")
    XCTAssertEqual(client.body(good), "ok")
    XCTAssertEqual(origin.requestCount, 1, "only the good stream went upstream")
    XCTAssertNil(client.goAwayCode, "the connection stays")
    XCTAssertFalse(client.sawEOF)
  }

  func testADrainSendsGoAwayAndClosesOnceTheStreamsEnd() throws {
    let origin = try HeldOrigin(holdingFirst: 1)
    defer { origin.close() }
    let proxy = try connect(to: origin.port)
    let client = proxy.client
    let stream = try client.request("/in-flight")
    XCTAssertTrue(client.pump { _ in origin.heldCount == 1 })

    let session = proxy.session
    proxy.loop.execute { session.drain() }
    XCTAssertTrue(client.pump { $0.goAwayCode != nil }, "\(client.events)")
    XCTAssertEqual(client.goAwayCode, HTTP2ErrorCode.noError)
    client.pump(timeout: 0.3) { _ in false }
    XCTAssertFalse(client.sawEOF, "the stream in flight keeps the connection")

    origin.release()
    XCTAssertTrue(client.pump { $0.ended(stream) }, "\(client.events)")
    XCTAssertEqual(client.status(stream), "200")
    XCTAssertEqual(client.body(stream), "late")
    XCTAssertTrue(client.pump { $0.sawEOF }, "closed once the last stream ended")
    XCTAssertTrue(proxy.loop.runAndWait { session.isClosed })
  }
}
