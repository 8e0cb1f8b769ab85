import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinHTTP2
import PinTestSupport
import PinTrust
import XCTest

@testable import PinProxy

/// What an upstream link told its session, recorded for the test thread.
/// The one fake of these tests: it stands for the forward session, which is
/// not under test. `mayRetryAfterClose` is read at the close, as the
/// session reads it.
final class RecordingUpstreamDelegate: UpstreamDelegate, @unchecked Sendable {
  struct Close {
    let failure: ProxyFailure?
    let mayRetry: Bool
  }

  private let lock = NSLock()
  private var _status: Int?
  private var _bodyBytes = 0
  private var _ended = false
  private var _close: Close?

  var status: Int? { lock.withLock { _status } }
  var bodyBytes: Int { lock.withLock { _bodyBytes } }
  /// The response ended (END_STREAM, as the parser's `.end`).
  var ended: Bool { lock.withLock { _ended } }
  var close: Close? { lock.withLock { _close } }

  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent]) {
    lock.withLock {
      for event in events {
        switch event {
        case .response(let head) where head.status >= 200: _status = head.status
        case .body(let bytes): _bodyBytes += bytes.count
        case .end where _status != nil: _ended = true
        default: break
        }
      }
    }
  }

  func upstreamDidDrain(_ upstream: any UpstreamLink) {}

  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    let mayRetry = upstream.mayRetryAfterClose
    lock.withLock { _close = Close(failure: failure, mayRetry: mayRetry) }
  }
}

extension ForwardedRequest {
  /// A bodiless GET for `path` at 127.0.0.1.
  static func get(_ path: String) -> ForwardedRequest {
    let head = HTTPRequestHead(
      method: "GET", target: .origin(path), rawTarget: path, version: .http11, headers: HTTPHeaders())
    return ForwardedRequest(head: head, path: path, authority: "127.0.0.1")
  }
}

/// The proxy's side of a test that builds `HTTP2UpstreamConnection`
/// directly: one loop, a pool on it, and connections over socket pairs
/// whose other end an `InProcessH2Origin` serves.
final class DirectH2Client: @unchecked Sendable {
  let group = EventLoopGroup(count: 1)
  var loop: EventLoop { group.loops[0] }
  let metrics = ProxyMetrics()
  let key = UpstreamKey(
    host: TrustHost("127.0.0.1")!, port: 443, tls: true,
    policy: PolicyIdentity(generation: 1, rule: .domain(0)))
  /// Made off the loop: its initialiser only stores the loop.
  let pool: HTTP2UpstreamPool

  init() { pool = HTTP2UpstreamPool(loop: group.loops[0]) }

  /// Runs `work` on the loop and waits for it.
  func onLoop<T>(_ work: () throws -> T) rethrows -> T { try loop.queue.sync(execute: work) }

  /// A new connection to `origin`, kept by the pool (as the acquirer
  /// keeps every h2 connection: one without a pool closes when idle).
  func connect(to origin: InProcessH2Origin, idleTimeout: Double = 60) throws -> HTTP2UpstreamConnection {
    let fd = try origin.servePair()
    return try onLoop {
      let channel = Connection(fd: fd, peer: "origin", loop: loop)
      let connection = try HTTP2UpstreamConnection(
        key: key, dialed: .plain(channel), limits: HTTPLimits(), metrics: metrics)
      pool.add(connection, idleTimeout: idleTimeout)
      return connection
    }
  }

  /// Reserves a stream, gives it `delegate` and sends a GET for `path`.
  func send(_ path: String, on connection: HTTP2UpstreamConnection, to delegate: RecordingUpstreamDelegate)
    -> HTTP2UpstreamStream?
  {
    onLoop {
      guard let stream = connection.reserveStream() else { return nil }
      stream.delegate = delegate
      stream.sendHead(.get(path))
      return stream
    }
  }

  /// Waits until the origin's SETTINGS have lowered the connection's stream
  /// limit to `limit`: with `limit` streams reserved it has no capacity left.
  func waitForStreamLimit(_ limit: Int, on connection: HTTP2UpstreamConnection) -> Bool {
    let held = onLoop { (0..<limit).compactMap { _ in connection.reserveStream() } }
    defer { onLoop { for stream in held { stream.close() } } }
    return held.count == limit && waitUntil { self.onLoop { !connection.hasCapacity } }
  }
}

/// The real acquirer of a forward session on one loop of a real
/// `ProxyContext`, compiled from YAML: one domain rule for 127.0.0.1
/// anchored at the test root that `InProcessH2Origin.listenTLS()`'s leaves
/// chain to (`rule` adds keys to it, e.g. a pin that refuses the origin).
final class AcquirerHarness: @unchecked Sendable {
  let group = EventLoopGroup(count: 1)
  var loop: EventLoop { group.loops[0] }
  let context: ProxyContext
  let snapshot: RuntimeSnapshot
  let target: ForwardTarget

  init(originPort: Int, rule: String = "") throws {
    let text = """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward}
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      domains:
        - {domain: 127.0.0.1, anchors: [test]\(rule)}
      logging:
        access: false
      """
    snapshot = try RuntimeSnapshot.compile(
      try ConfigurationParser.parse(text, file: "acquirer.yaml"), generation: 1)
    context = ProxyContext(
      snapshot: snapshot, group: group, logger: ProxyLogger(minimum: .error, access: false))
    let host = TrustHost("127.0.0.1")!
    let route = try XCTUnwrap(UpstreamRoute(host: host, snapshot: snapshot))
    target = ForwardTarget(
      key: UpstreamKey(host: host, port: originPort, tls: true, policy: route.identity), route: route,
      path: "/")
  }

  var pool: UpstreamPool { context.pool(for: loop) }

  /// Runs `work` on the loop and waits for it.
  func onLoop<T>(_ work: () throws -> T) rethrows -> T { try loop.queue.sync(execute: work) }

  /// Starts `count` acquisitions in one turn of the loop, so that all but
  /// the first find the first one's dial under way. Their results arrive
  /// in `results` as they complete.
  func acquire(_ count: Int, into results: AcquiredLinks) {
    onLoop {
      let acquirer = UpstreamAcquirer(
        context: context, snapshot: snapshot, loop: loop, client: "127.0.0.1", connection: 0)
      for index in 0..<count {
        acquirer.acquire(target, poolAllowed: true) { results.record(index, $0) }
      }
    }
  }

  /// One acquisition, waited for.
  func acquireOne(timeout: Double = 10) -> Result<any UpstreamLink, ProxyFailure>? {
    let results = AcquiredLinks()
    acquire(1, into: results)
    guard waitUntil(timeout: timeout, { results.count == 1 }) else { return nil }
    return results.result(0)
  }

  /// Sends a GET on `link` and waits for its response to end.
  func exchange(_ path: String, on link: any UpstreamLink) -> RecordingUpstreamDelegate {
    let delegate = RecordingUpstreamDelegate()
    onLoop {
      link.delegate = delegate
      link.sendHead(.get(path))
    }
    _ = waitUntil(timeout: 10) { delegate.ended || delegate.close != nil }
    return delegate
  }

  func release(_ link: any UpstreamLink) {
    onLoop { link.release(to: UpstreamRelease(pool: pool, idleTimeout: 60, maxIdle: 8)) }
  }
}

/// Acquisition results by index, filled on the loop and read by the test.
final class AcquiredLinks: @unchecked Sendable {
  private let lock = NSLock()
  private var results: [Int: Result<any UpstreamLink, ProxyFailure>] = [:]

  func record(_ index: Int, _ result: Result<(link: any UpstreamLink, pooled: Bool), ProxyFailure>) {
    lock.withLock { results[index] = result.map(\.link) }
  }

  var count: Int { lock.withLock { results.count } }
  func result(_ index: Int) -> Result<any UpstreamLink, ProxyFailure>? { lock.withLock { results[index] } }

  /// The HTTP/2 streams acquired, in index order (failures left out).
  var streams: [HTTP2UpstreamStream] {
    lock.withLock {
      results.keys.sorted().compactMap { try? results[$0]?.get() as? HTTP2UpstreamStream }
    }
  }

  var failures: [ProxyFailure] {
    lock.withLock {
      results.keys.sorted().compactMap {
        if case .failure(let failure) = results[$0] { failure } else { nil }
      }
    }
  }
}
