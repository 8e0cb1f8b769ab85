import Dispatch
import PinHTTP
import PinTrust

/// One request and its response, as the forward state machine tracks it: a
/// value carried in the machine's state, never shared.
struct Exchange {
  /// Numbers the exchanges of one session, so that a dial completion or a
  /// timer meant for an earlier exchange is recognised and ignored.
  let id: Int
  let request: HTTPRequestHead
  let target: ForwardTarget
  let started = DispatchTime.now().uptimeNanoseconds
  var requestComplete = false
  var requestBodyBytes = 0
  var response = ResponseProgress.awaitingHead
  /// The client asked to close, or the response can only end with the connection.
  var closeAfterResponse: Bool
  /// A pooled connection that turned out closed gets one fresh attempt.
  var retried = false
  var upstreamWasPooled = false
  var upstreamTLS = UpstreamTLS.none
  var upstreamProtocol = UpstreamProtocol.http1

  init(id: Int, request: HTTPRequestHead, target: ForwardTarget, closeAfterResponse: Bool) {
    self.id = id
    self.request = request
    self.target = target
    self.closeAfterResponse = closeAfterResponse
  }

  /// Framed with Content-Length or chunked; a request without either has no body.
  var hasBody: Bool {
    switch request.framing {
    case .none, .length(0): return false
    default: return true
    }
  }

  var requestChunked: Bool { request.framing == .chunked }

  var responseStarted: Bool { if case .streaming = response { true } else { false } }
}

/// How far the response has come.
enum ResponseProgress {
  case awaitingHead
  /// A 1xx head was relayed; its end is not the response's end.
  case interim
  case streaming(ResponseStream)
}

struct ResponseStream {
  let status: Int
  /// Re-framed as chunked towards the client (`ForwardedHead.response`).
  let chunked: Bool
  /// False once the origin said it closes (or spoke HTTP/1.0 without keep-alive).
  let upstreamKeepsAlive: Bool
  var bodyBytes = 0
}

/// What an exchange was, for the access log and metrics.
struct ExchangeRecord {
  let exchange: Exchange
  let status: Int
  let responseBytes: Int
}
