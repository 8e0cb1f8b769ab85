import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// One HTTP/1.1 connection to an origin: a trusted channel from
/// `UpstreamDialer` (TCP, or TLS whose chain was already accepted) and the
/// response parser. Reused through `UpstreamPool` only while clean.
///
/// Confined to its channel's loop (`loop.queue`): every entry point is a
/// session call or a channel delegate call on that queue.
final class UpstreamConnection: UpstreamLink, ChannelDelegate, @unchecked Sendable {
  let key: UpstreamKey
  /// The dial's channel and what it learnt (TLS, session resumption).
  private let dialed: DialedUpstream
  var channel: any ByteChannel { dialed.channel }
  var tls: UpstreamTLS { dialed.tls }
  let protocolName = WireProtocol.http1
  /// HTTP/1.1 has no way to say a request went unprocessed: only a pooled
  /// connection's close before any response byte is taken as a race.
  var mayRetryAfterClose: Bool { reusedFromPool }
  /// Held strongly (a weak reference would slow every retain and release
  /// of the session): the session holds this connection while it uses it,
  /// and the cycle ends when the connection closes (`close()` lets go) or
  /// goes to the pool (which becomes the delegate).
  var delegate: (any UpstreamDelegate)?
  private var parser: HTTP1Parser
  /// What one read parsed, body bytes lent from the read (reused per read).
  private var events = BorrowedEvents()
  /// Where request heads are written (reused per request).
  private var headBuffer: [UInt8] = []
  /// The request being sent is chunked (its body's framing, from the parser).
  private var requestChunked = false
  private var closed = false
  private(set) var reusedFromPool = false
  /// The pool's list for its key that it was last taken from or put in
  /// (`UpstreamPool.put` finds it there, hashing no key). On the loop only.
  var idleList: UpstreamPool.IdleList?
  private(set) var sawEndOfStream = false
  /// The origin has sent a byte on this connection (a close before that
  /// may be a refused handshake: `DialedUpstream.refusalForMissingCertificate`).
  private var heardFromOrigin = false
  /// This socket's place in the upstream budget (nil for the daemon's own requests).
  let charge: UpstreamCharge?

  init(key: UpstreamKey, dialed: DialedUpstream, limits: HTTPLimits, charge: UpstreamCharge? = nil) {
    self.key = key
    self.dialed = dialed
    self.charge = charge
    loop = dialed.channel.loop
    parser = HTTP1Parser(role: .response, limits: limits, pausesBetweenMessages: true)
    channel.delegate = self
    channel.resumeReading()
  }

  /// The channel's loop, kept: asked through the channel's protocol at
  /// every entry point, it was a call and a retain each (eight a request).
  let loop: EventLoop
  var isOpen: Bool { !closed && channel.isOpen }
  /// Idle and clean: nothing of a response pending, no EOF seen.
  /// An origin that sent anything past the end of its response (an unsolicited
  /// response, say) is out of step with its requests: never reused, or the
  /// next client would receive what was sent for nobody. Bytes already read
  /// show here; bytes still in the kernel are asked about once, at reuse
  /// (`hasNoUnreadInput`), not at every check.
  var isReusable: Bool {
    loop.preconditionInLoop()
    return isOpen && parser.isIdle && !sawEndOfStream && channel.pendingOutputBytes == 0
      && !channel.hasBufferedInput
  }

  /// Nothing (not even a FIN) waits in the kernel: a syscall, so only when a
  /// pooled connection is taken for a new request.
  var hasNoUnreadInput: Bool { !channel.hasUnreadInput() }
  var isAboveHighWatermark: Bool { channel.isAboveHighWatermark }

  func markReused() {
    loop.preconditionInLoop()
    reusedFromPool = true
  }

  /// Writes the head, framed from the parser's decision, and prepares the
  /// parser for the response to it.
  func sendHead(_ request: ForwardedRequest) {
    loop.preconditionInLoop()
    parser.expectResponse(to: request.head.method)
    // Paused after the previous response with nothing buffered (else not reusable).
    _ = try? parser.resume()
    requestChunked = request.head.framing == .chunked
    // Written into this connection's own buffer: TLS takes the bytes at
    // once, so the buffer is free again for the next request's head.
    headBuffer.removeAll(keepingCapacity: headBuffer.capacity <= 16 * 1024)
    ForwardedHead.appendRequest(
      request.head, target: request.path, authority: request.authority, via: request.via, to: &headBuffer)
    send(headBuffer)
  }

  func sendBody(_ bytes: [UInt8]) { send(requestChunked ? HTTPSerializer.chunk(bytes) : bytes) }

  func endBody(trailers: HTTPHeaders) {
    if requestChunked { send(HTTPSerializer.lastChunk(trailers: ForwardedHead.trailers(trailers))) }
  }

  func release(to release: UpstreamRelease) {
    rememberSession()
    // Idle, it is nobody's: it counts in the total only until reused or closed.
    charge?.releaseClient()
    release.pool.put(self, idleTimeout: release.idleTimeout, maxIdle: release.maxIdle)
  }

  private func send(_ bytes: [UInt8]) {
    loop.preconditionInLoop()
    guard isOpen else { return }
    channel.write(bytes)
  }

  /// Keeps the TLS session for resumption. TLS 1.3 tickets arrive after the
  /// handshake, so this is called again once a response has been read.
  func rememberSession() {
    loop.preconditionInLoop()
    dialed.rememberSession()
  }

  func pauseReading() {
    loop.preconditionInLoop()
    channel.pauseReading()
  }
  func resumeReading() {
    loop.preconditionInLoop()
    channel.resumeReading()
  }

  /// Closes without telling the delegate (the caller is the one closing),
  /// and lets go of it.
  func close() {
    loop.preconditionInLoop()
    delegate = nil
    guard !closed else { return }
    closed = true
    charge?.releaseAll()
    dialed.closeKeepingSession()
  }

  /// Closes, then tells the delegate it had (`failure` says why, when a
  /// message in progress broke).
  private func closeTellingDelegate(_ failure: ProxyFailure?) {
    let told = delegate
    close()
    told?.upstreamDidClose(self, failure: failure)
  }

  private func abort(_ failure: ProxyFailure) {
    if isOpen { closeTellingDelegate(failure) } else { close() }
  }

  // MARK: ChannelDelegate

  /// The response is parsed where the channel read it: body bytes are lent
  /// from the read to the delegate, which copies them once, into the
  /// client's send path; a partial head or chunk line is all the parser keeps.
  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    guard isOpen else { return }
    heardFromOrigin = true
    do {
      events.removeAll()
      try parser.feed(bytes, into: &events)
      if !events.isEmpty { delegate?.upstream(self, didReceive: events.list) }
      // Once delivered, a head's storage serves the next response, and
      // nothing of this one is held (a pooled connection would keep it).
      events.removeAll(recyclingHeadsInto: &parser)
      if isOpen && parser.isPaused && parser.hasBufferedInput {
        // Bytes after a complete response that nobody asked for.
        closeTellingDelegate(nil)
      }
    } catch {
      abort(.unreachable("malformed response from \(key)", detail: error.reason))
    }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    sawEndOfStream = true
    guard isOpen else { return }
    if let refusal = dialed.refusalForMissingCertificate(key: key, heardFromOrigin: heardFromOrigin) {
      return abort(refusal)
    }
    do {
      events.removeAll()
      try parser.finish(into: &events)
      if !events.isEmpty { delegate?.upstream(self, didReceive: events.list) }
      closeTellingDelegate(nil)
    } catch {
      abort(.unreachable("\(key) closed the connection before the response was complete"))
    }
  }

  func channelDidDrain(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    delegate?.upstreamDidDrain(self)
  }

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    guard !closed else { return }
    closed = true
    charge?.releaseAll()
    let told = delegate
    delegate = nil
    let failure = error.map {
      dialed.refusalForMissingCertificate(key: key, heardFromOrigin: heardFromOrigin)
        ?? UpstreamConnection.failure($0, key: key)
    }
    told?.upstreamDidClose(self, failure: failure)
  }

  /// What broke an established connection. An alert after our side
  /// finished the handshake is still the server refusing the session (with
  /// TLS 1.3 a missing client certificate is reported this way).
  static func failure(_ error: any Error, key: UpstreamKey) -> ProxyFailure {
    if let error = error as? TLSEngine.Failure {
      if error.isAlertFromPeer {
        return ProxyFailure(
          status: 502, code: .handshakeFailed, reason: "\(key) refused the TLS session",
          detail: error.description)
      }
      return .unreachable("TLS error from \(key)", detail: error.description)
    }
    return .unreachable("connection to \(key) failed", detail: "\(error)")
  }
}
