import Dispatch
import PinEventLoop
import PinHTTP

/// One exchange of an HTTP/2 client: a stream of an intercepted CONNECT
/// whose client chose `h2`. Its state says how far the exchange has come;
/// the session (`HTTP2ClientSession`) moves it on.
///
/// Confined to the session's loop.
final class HTTP2ClientStream: @unchecked Sendable {
  enum State {
    /// Routed; its upstream is being acquired. Request DATA waits here,
    /// unconsumed (the client's stream window bounds it).
    case connecting
    /// The head went upstream; body and response flow.
    case exchanging(any UpstreamLink)
    /// Answered (relayed to the end, or refused); nothing more is sent upstream.
    case done
  }

  let id: Int32
  let head: HTTPRequestHead
  let target: ForwardTarget
  var state = State.connecting
  let started = DispatchTime.now().uptimeNanoseconds
  /// Request body that arrived before the upstream was ready.
  var pendingBody: [[UInt8]] = []
  var requestBodyBytes = 0
  var requestComplete = false
  var requestTrailers = HTTPHeaders()
  /// DATA forwarded while the upstream was backed up: consumed (window
  /// reopened) when it drains.
  var unconsumed = 0
  var responseStatus: Int?
  var responseHasBody = false
  var responseBytes = 0
  var upstreamKeepsAlive = true
  var upstreamWasPooled = false
  var upstreamTLS = UpstreamTLS.none
  var upstreamProtocol = UpstreamProtocol.http1
  var retried = false
  /// Held until its (small, declared) body is complete; not yet acquiring.
  var awaitingBody = false
  /// Waiting for one of its connection's upstream slots; not yet acquiring.
  var queuedForUpstream = false
  /// The upstream is paused because the client side of this stream is backed up.
  var upstreamPaused = false
  var responseTimer: LoopTimer?

  init(id: Int32, head: HTTPRequestHead, target: ForwardTarget) {
    self.id = id
    self.head = head
    self.target = target
  }

  var link: (any UpstreamLink)? {
    if case .exchanging(let link) = state { link } else { nil }
  }

  var isDone: Bool { if case .done = state { true } else { false } }
}
