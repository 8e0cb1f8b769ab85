import Foundation
import PinHTTP
import PinHTTP2

/// A response on one stream of an HTTP/2 client connection: heads and
/// trailers mapped to header blocks (`HTTP2Mapping`), body bytes handed to
/// nghttp2, which frames them within the stream's flow-control window.
/// Nothing reaches the socket until the session flushes.
struct HTTP2Downstream: DownstreamLink {
  let session: HTTP2Session
  let stream: Int32
  /// The response has a body: its end is an empty DATA frame with END_STREAM (or trailers).
  private(set) var hasBody = false

  init(session: HTTP2Session, stream: Int32) {
    self.session = session
    self.stream = stream
  }

  /// Interim responses (1xx) are not relayed: the final one follows.
  mutating func sendInterim(_ head: HTTPResponseHead) {}

  mutating func sendHead(_ head: HTTPResponseHead, upstreamProtocol: WireProtocol) -> Bool {
    hasBody = head.framing != .none
    let block =
      HTTP2Mapping.responseBlock(head) + [HTTP2Header("via", ForwardedRequest.via(upstreamProtocol))]
    do {
      try session.submitResponse(stream: stream, block, streaming: hasBody)
      return true
    } catch {
      return false
    }
  }

  mutating func sendBody(_ bytes: UnsafeRawBufferPointer) { session.sendBody(stream: stream, bytes) }

  mutating func end(trailers: HTTPHeaders) {
    if hasBody { session.endBody(stream: stream, trailers: HTTP2Mapping.trailerBlock(trailers)) }
  }

  mutating func refuse(_ refusal: Refusal, at time: Date) {
    let failure = refusal.failure
    let (body, type) = refusal.responseBody(at: time)
    var block = [
      HTTP2Header(":status", String(failure.status)), HTTP2Header("content-type", type),
      HTTP2Header("content-length", String(body.count)), HTTP2Header("pinproxy-error", failure.code.rawValue),
      HTTP2Header("pinproxy-incident", refusal.incident), HTTP2Header("cache-control", "no-store"),
    ]
    // The refusal's own fields (a challenge, Retry-After), names lowercased (RFC 9113 §8.2.1).
    for field in failure.headers { block.append(HTTP2Header(field.name.lowercased(), field.value)) }
    try? session.submitResponse(stream: stream, block, body: body)
  }
}
