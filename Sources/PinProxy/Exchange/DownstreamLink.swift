import Foundation
import PinHTTP

/// How one exchange's response reaches the client that asked, in that
/// client's protocol: the exchange machine decides what is sent; a
/// downstream link frames it. Two kinds, beside `UpstreamLink`'s two:
/// `HTTP1Downstream` (a response on an HTTP/1.1 connection, re-framed from
/// the parser's decision) and `HTTP2Downstream` (one stream of an HTTP/2
/// connection, handed to nghttp2).
protocol DownstreamLink {
  /// A 1xx response: relayed where the protocol carries it, else dropped.
  mutating func sendInterim(_ head: HTTPResponseHead)
  /// The final head. False when the client can no longer take a response.
  mutating func sendHead(_ head: HTTPResponseHead, upstreamProtocol: WireProtocol) -> Bool
  /// Body bytes, copied on before the call returns.
  mutating func sendBody(_ bytes: UnsafeRawBufferPointer)
  mutating func end(trailers: HTTPHeaders)
  /// Answers a refusal: status, `pinproxy-error`, and the plain-text reason
  /// or, for a client that asked for HTML, the page made at `time`.
  mutating func refuse(_ refusal: Refusal, at time: Date)
}

/// A response to an HTTP/1.1 client, framed from the parser's decision
/// (`ForwardedHead.response`): what it produces waits in `output` for the
/// connection machine to write. Pure: no socket, no clock.
struct HTTP1Downstream: DownstreamLink {
  private(set) var clientVersion: HTTPVersion
  /// The connection closes after this response (the client asked, or the proxy drains).
  var closing: Bool
  /// Re-framed as chunked towards the client.
  private(set) var chunked = false
  /// The response can only end with the connection (no length, an HTTP/1.0 client).
  private(set) var endsWithConnection = false
  /// What was framed and not yet written: one buffer for the connection's
  /// life, emptied (its storage kept, up to `keptOutputCapacity`) once
  /// written, so a keep-alive connection frames every response in place.
  private(set) var output: [UInt8] = []
  /// Bytes of `output` before this index were handed out (`takeOutputRange`).
  private var handedOut = 0
  /// A buffer grown past this (a large chunked body) is let go once written.
  static let keptOutputCapacity = 16 * 1024

  /// `output`: an emptied buffer to frame into (one a finished connection
  /// handed back), so the first response allocates none.
  init(clientVersion: HTTPVersion, closing: Bool, output: [UInt8] = []) {
    self.clientVersion = clientVersion
    self.closing = closing
    self.output = output
    // Emptying an array that has no storage would make one.
    if !output.isEmpty { self.output.removeAll(keepingCapacity: true) }
  }

  /// The next response on the same connection: what is framed but not yet
  /// written stays (an action still names it).
  mutating func reset(clientVersion: HTTPVersion, closing: Bool) {
    self.clientVersion = clientVersion
    self.closing = closing
    chunked = false
    endsWithConnection = false
  }

  /// Starts over for another connection (a retired session's next
  /// client): as `init` leaves it, the buffer emptied in place (let go of
  /// past `keptOutputCapacity`).
  mutating func restart(clientVersion: HTTPVersion, closing: Bool) {
    reset(clientVersion: clientVersion, closing: closing)
    if output.capacity > Self.keptOutputCapacity {
      output = []
    } else if !output.isEmpty {
      output.removeAll(keepingCapacity: true)
    }
    handedOut = 0
  }

  /// The bytes framed since the last call, as a range of `output`; nil when none.
  mutating func takeOutputRange() -> Range<Int>? {
    guard output.count > handedOut else { return nil }
    defer { handedOut = output.count }
    return handedOut..<output.count
  }

  /// Every range handed out was written: the buffer is empty again.
  mutating func outputWritten() {
    guard !output.isEmpty else { return }
    if output.capacity <= Self.keptOutputCapacity {
      output.removeAll(keepingCapacity: true)
    } else {
      output = []
    }
    handedOut = 0
  }

  /// What was framed since the last call; the buffer moves out, uncopied
  /// (a refusal, written once; a connection's responses use `takeOutputRange`).
  mutating func takeOutput() -> [UInt8] {
    var taken: [UInt8] = []
    swap(&taken, &output)
    handedOut = 0
    return taken
  }

  private mutating func emit(_ bytes: [UInt8]) {
    if output.isEmpty { output = bytes } else { output += bytes }
  }

  mutating func sendInterim(_ head: HTTPResponseHead) {
    // 101 would switch protocols, which this proxy does not relay; an
    // HTTP/1.0 client knows no 1xx (RFC 9110 §15.2).
    guard head.status != 101 && clientVersion == .http11 else { return }
    emit(HTTPSerializer.responseHead(HTTPResponseHead(status: head.status, reason: head.reason)))
  }

  mutating func sendHead(_ head: HTTPResponseHead, upstreamProtocol: WireProtocol) -> Bool {
    let framing = ForwardedHead.appendResponse(
      head, clientVersion: clientVersion, closing: closing, via: ForwardedRequest.via(upstreamProtocol),
      to: &output)
    chunked = framing == .chunked
    endsWithConnection = framing == .untilClose
    return true
  }

  mutating func sendBody(_ bytes: UnsafeRawBufferPointer) {
    if chunked {
      HTTPSerializer.appendChunk(bytes, to: &output)
    } else {
      output.append(contentsOf: bytes)
    }
  }

  mutating func end(trailers: HTTPHeaders) {
    guard chunked else { return }
    HTTPSerializer.appendLastChunk(
      trailers: trailers.count == 0 ? trailers : ForwardedHead.trailers(trailers), to: &output)
  }

  mutating func refuse(_ refusal: Refusal, at time: Date) {
    emit(
      refusal.failure.response(
        closing: true, body: refusal.responseBody(at: time), incident: refusal.incident))
  }
}
