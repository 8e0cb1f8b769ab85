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
  var protocolName: UpstreamProtocol { get }
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

/// The request an upstream link sends: the client's head, the origin-form
/// target and the authority (Host or `:authority`).
struct ForwardedRequest {
  let head: HTTPRequestHead
  let path: String
  let authority: String
  /// The `Via` entry this hop adds: the protocol it received the request in.
  var via = ForwardedRequest.via(.http1)

  /// RFC 9110 §7.6.3: `received-protocol` names the version the message
  /// came in, so HTTP/2 is `2`.
  static func via(_ received: UpstreamProtocol) -> String {
    received == .http2 ? "2 pinproxy" : "1.1 pinproxy"
  }
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

/// The protocol spoken to the origin, for the access log and metrics; also
/// what a client chose inside an intercepted CONNECT. The raw values are the
/// ALPN identifiers (RFC 7301).
enum UpstreamProtocol: String, Sendable {
  case http1 = "http/1.1"
  case http2 = "h2"

  /// What ALPN's answer means for the HTTP spoken: no answer, or one other
  /// than `h2`, is HTTP/1.1 (the only other protocol we offer or select).
  init(alpn: String?) {
    self = alpn == UpstreamProtocol.http2.rawValue ? .http2 : .http1
  }
}

/// What an upstream link reports to the session using it (on its loop).
protocol UpstreamDelegate: AnyObject {
  /// Response events, in order.
  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.Event])
  func upstreamDidDrain(_ upstream: any UpstreamLink)
  /// Closed; `failure` says why when it broke a message in progress.
  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?)
}

/// A link as the forward machine holds it: compared by identity.
struct UpstreamRef: SameUpstream {
  let link: any UpstreamLink
  func isSame(as other: UpstreamRef) -> Bool { link === other.link }
}
