import PinHTTP
import PinTrust

/// One request and its response, as the exchange machine tracks it: a
/// value carried in the machine, never shared. The same for a request read
/// from an HTTP/1.1 connection and for one HTTP/2 stream.
struct Exchange {
  /// Numbers the exchanges of one session, so that a dial completion or a
  /// timer meant for an earlier exchange is recognised and ignored.
  let id: Int
  let request: HTTPRequestHead
  let target: ForwardTarget
  /// What the client spoke: this hop's `Via` and the access line say it.
  let clientProtocol: WireProtocol
  /// When the request began (monotonic nanoseconds, read by the I/O side):
  /// the access line's duration.
  let started: UInt64
  var requestComplete = false
  var requestBodyBytes = 0
  /// Trailers that ended the request before its upstream was ready.
  var requestTrailers = HTTPHeaders()
  var response = ResponseProgress.awaitingHead
  /// A request that found its upstream closed gets one fresh attempt.
  var retried = false
  var upstreamWasPooled = false
  var upstreamTLS = UpstreamTLS.none
  var upstreamProtocol = WireProtocol.http1

  init(
    id: Int, request: HTTPRequestHead, target: ForwardTarget, clientProtocol: WireProtocol, started: UInt64
  ) {
    self.id = id
    self.started = started
    self.request = request
    self.target = target
    self.clientProtocol = clientProtocol
  }

  /// Framed with Content-Length or chunked; a request without either has no body.
  var hasBody: Bool {
    switch request.framing {
    case .none, .length(0): return false
    default: return true
    }
  }

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
  /// False once the origin said it closes (or spoke HTTP/1.0 without keep-alive).
  let upstreamKeepsAlive: Bool
  var bodyBytes = 0
}
