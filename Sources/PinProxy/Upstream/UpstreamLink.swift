import PinHTTP

/// What an exchange holds of its upstream: an HTTP/1.1 connection of its
/// own (`UpstreamConnection`) or one stream of a shared HTTP/2 connection
/// (`HTTP2UpstreamStream`). The forward machine decides what is sent; a
/// link writes it in its protocol's framing, from the parser's decision
/// carried in the request head.
///
/// Confined to its loop, like the session using it.
protocol UpstreamLink: AnyObject {
  var key: UpstreamKey { get }
  var tls: UpstreamTLS { get }
  var protocolName: WireProtocol { get }
  /// Came from the pool, or rode an HTTP/2 connection that was already open.
  var reusedFromPool: Bool { get }
  /// After a close without a response, whether the request may be sent
  /// again (when no body byte went): an HTTP/1.1 connection taken from the
  /// pool (the origin may have closed it while idle, racing our request); an
  /// h2 stream only when the origin said it never processed it (REFUSED_STREAM,
  /// or above a GOAWAY's last stream id, RFC 9113 §8.7). A stream the origin
  /// reset after starting it is never retried.
  var mayRetryAfterClose: Bool { get }
  var delegate: (any UpstreamDelegate)? { get set }
  var isAboveHighWatermark: Bool { get }
  /// The head, and with it the expectation of a response to its method.
  func sendHead(_ request: ForwardedRequest)
  func sendBody(_ bytes: [UInt8])
  func endBody(trailers: HTTPHeaders)
  func pauseReading()
  func resumeReading()
  /// The exchange completed cleanly: keep what can serve another (an idle
  /// connection to the pool, a stream's slot to the next request).
  func release(to context: UpstreamRelease)
  /// Abandons the exchange: the connection closes (HTTP/1.1) or the stream
  /// is reset (HTTP/2). The delegate is not told.
  func close()
}

/// Where a finished HTTP/1.1 connection may go for reuse.
struct UpstreamRelease {
  let pool: UpstreamPool
  let idleTimeout: Double
  let maxIdle: Int
}

extension UpstreamRelease {
  /// Into `pool`, under the snapshot's idle timeout and per-upstream bound.
  init(pool: UpstreamPool, snapshot: RuntimeSnapshot) {
    self.init(
      pool: pool, idleTimeout: snapshot.timeouts.upstreamIdle, maxIdle: snapshot.limits.maxIdlePerUpstream)
  }
}

/// What an upstream link reports to the session using it (on its loop).
protocol UpstreamDelegate: AnyObject {
  /// Response events, in order. Body bytes are lent: they are valid during
  /// the call only, so the delegate copies them on before it returns.
  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent])
  func upstreamDidDrain(_ upstream: any UpstreamLink)
  /// Closed; `failure` says why when it broke a message in progress.
  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?)
}

/// A link as the exchange machines hold it: a handle into its host's
/// `UpstreamLinks`, the slot the link was put in and that slot's generation
/// then. Eight bytes, trivially copyable: actions and events naming an
/// upstream retain nothing as they are queued, copied and dropped, and a
/// handle whose link was released or closed since resolves to nothing
/// (the slot's generation moved on), never to the next link in its slot.
struct UpstreamRef: SameUpstream, Equatable, BitwiseCopyable {
  let slot: UInt32
  let generation: UInt32
  func isSame(as other: UpstreamRef) -> Bool { self == other }
}
