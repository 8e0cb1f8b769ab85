import Dispatch
import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinHTTP2

/// The client side of an intercepted CONNECT whose client chose `h2`: each
/// stream is an exchange of its own, routed under the CONNECT host's rule
/// to an HTTP/1.1 or HTTP/2 upstream (`UpstreamAcquirer`). A refusal is an
/// answer on that stream only (status, `pinproxy-error`, a plain-text
/// reason); the other streams go on.
///
/// What a client may send is bounded: concurrent streams (SETTINGS, 100),
/// each header block by `limits.maxHeaderCount` fields and
/// `limits.maxHeaderBytes` as it is decoded (`HTTP2Session`; past either the
/// stream is reset), request DATA by the stream windows (nothing is consumed
/// until forwarded), resets and CONTINUATION frames by nghttp2's flood
/// limits (`HTTP2Limits`), after which the connection ends with GOAWAY.
/// nghttp2 resets every malformed request (RFC 9113 §8.2) before it is seen
/// here, so none is ever forwarded.
///
/// What a client may cause is bounded too: at most
/// `maxUpstreamExchanges` of its streams hold an upstream at once (the rest
/// wait their turn, each within `timeouts.upstreamResponse`); upstream
/// sockets per client address and in all (`UpstreamBudget`); response bytes
/// buffered for a reader that does not keep up, per stream, per connection
/// and in all (`pausesUpstream`).
///
/// Confined to its loop: every entry point is a call from the owning
/// `ForwardSession` (channel events), an upstream delegate call or an
/// acquisition completion on `loop.queue`.
final class HTTP2ClientSession: UpstreamDelegate, @unchecked Sendable {
  let client: any ByteChannel
  let loop: EventLoop
  let session: HTTP2Session
  let context: ProxyContext
  /// Replaced by the current one before a new stream is routed (a reload governs what follows it).
  private(set) var snapshot: RuntimeSnapshot
  let listener: ListenerConfig
  let tunnel: ConnectTarget
  private var router: ForwardRouter
  let pool: UpstreamPool
  /// The client's admission key, for the upstream budget (parsed once).
  private lazy var clientKey = ConnectionAdmission.address(of: client.peer)
  var streams: [Int32: HTTP2ClientStream] = [:]
  var byLink: [ObjectIdentifier: HTTP2ClientStream] = [:]
  private var closed = false
  /// GOAWAY sent (shutdown): no new streams; close when the last one ends.
  private var draining = false
  /// The client sent GOAWAY: an ending session is its choice, not a limit's.
  private var clientWentAway = false
  private var resets = ResetBucket()
  private lazy var idleTimer: LoopTimer = loop.makeTimer { [weak self] in self?.idleTimeout() }
  private(set) var lastActivity = DispatchTime.now().uptimeNanoseconds
  static let maxConcurrentStreams: UInt32 = 100
  /// Streams that hold (or are acquiring) an upstream at once; later ones
  /// wait in `queued`, which `maxConcurrentStreams` bounds.
  static let maxUpstreamExchanges = 32
  var queued: [HTTP2ClientStream] = []
  /// Response body buffered per stream before its upstream is paused.
  static let highWatermark = 256 * 1024
  /// Response body buffered for the whole connection before its upstreams pause.
  static let connectionBufferLimit = 1 << 20
  /// Past `UpstreamBudget.bufferedBytesLimit` in all, a connection holding
  /// more than this pauses its upstreams too.
  static let slowConnectionFloor = 64 * 1024
  /// What this connection last added to the process-wide buffered count.
  var bufferedReported = 0
  /// Declared request bodies up to this size are held until complete.
  static let heldBodyLimit = 64 * 1024

  init(
    client: any ByteChannel, context: ProxyContext, snapshot: RuntimeSnapshot, listener: ListenerConfig,
    tunnel: ConnectTarget, pool: UpstreamPool
  ) throws {
    self.client = client
    loop = client.loop
    self.context = context
    self.snapshot = snapshot
    self.listener = listener
    self.tunnel = tunnel
    self.pool = pool
    router = ForwardRouter(snapshot: snapshot, listener: listener)
    let limits = snapshot.httpLimits
    session = try HTTP2Session(
      role: .server, maxConcurrentStreams: Self.maxConcurrentStreams,
      maxHeaderListSize: UInt32(clamping: limits.maxHeaderBytes), limits: HTTP2Limits(headerLimits: limits))
    flush()
    idleTimer.schedule(after: snapshot.timeouts.idleKeepAlive)
  }

  var hasStreams: Bool { !streams.isEmpty }

  var acquirer: UpstreamAcquirer {
    UpstreamAcquirer(context: context, snapshot: snapshot, loop: loop, client: clientKey)
  }

  /// How expendable the connection is under overload: with no stream, an
  /// idle keep-alive connection; with only streams whose request has not
  /// finished arriving (nothing sent upstream yet), a slow one; else nil.
  var evictionCandidate: EvictionCandidate? {
    if streams.isEmpty { return EvictionCandidate(tier: .idleKeepAlive, since: lastActivity) }
    guard streams.values.allSatisfy(\.awaitingBody) else { return nil }
    return EvictionCandidate(tier: .unfinishedHead, since: lastActivity)
  }

  // MARK: Client bytes (from the owning session)

  func clientRead(_ bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    guard !closed else { return }
    lastActivity = DispatchTime.now().uptimeNanoseconds
    let events: [HTTP2Event]
    do {
      events = try session.receive(bytes)
    } catch {
      context.metrics.http2Events.increment(["downstream", "protocol_error"])
      logBadRequest(.info, "HTTP/2 protocol error: \(error.description)")
      flush()
      return closeAll()
    }
    handle(events)
  }

  /// The client's events, in order; then what they caused is flushed.
  private func handle(_ events: [HTTP2Event]) {
    var index = 0
    while index < events.count {
      let event = events[index]
      index += 1
      switch event {
      case .headers(let id, let block):
        if let stream = streams[id] {
          stream.requestTrailers = HTTP2Mapping.trailers(block)
        } else {
          let ends = index < events.count && events[index] == .endStream(stream: id)
          begin(id, block, endsStream: ends)
          if ends { index += 1 }
        }
      case .data(let id, let bytes):
        body(bytes, on: id)
      case .endStream(let id):
        endOfRequest(id)
      case .streamClosed(let id, let code):
        streamClosed(id, code: code)
      case .refused(let id):
        context.metrics.http2Events.increment(["downstream", "malformed"])
        logBadRequest(.info, "malformed HTTP/2 request on stream \(id) (RFC 9113 §8.2), reset")
      case .oversizedHeaders(let id):
        context.metrics.http2Events.increment(["downstream", "oversized_headers"])
        let limits = snapshot.httpLimits
        logBadRequest(
          .info,
          "HTTP/2 header block on stream \(id) over \(limits.maxHeaderCount) fields or \(limits.maxHeaderBytes) bytes, reset"
        )
      case .goAway:
        draining = true
        clientWentAway = true
      case .settings, .pingAcknowledged:
        break
      }
    }
    flush()
  }

  func clientDrained() {
    loop.preconditionInLoop()
    flush()
  }

  /// The client half-closed: nothing more will come; the connection ends.
  func clientEnded() {
    loop.preconditionInLoop()
    closeAll()
  }

  /// The client connection ended: every exchange in progress is abandoned.
  func clientClosed() {
    loop.preconditionInLoop()
    closed = true
    idleTimer.cancel()
    for stream in streams.values { abandon(stream) }
    context.metrics.http2StreamsInFlight.add(-streams.count)
    streams.removeAll()
    queued.removeAll()
    reportBuffered(0)
  }

  /// Graceful shutdown: GOAWAY now; the connection closes when the streams end.
  func drain() {
    loop.preconditionInLoop()
    draining = true
    try? session.submitGoAway()
    flush()
    if streams.isEmpty { closeAll() }
  }

  // MARK: Streams

  private func begin(_ id: Int32, _ block: [HTTP2Header], endsStream: Bool) {
    idleTimer.cancel()
    if !context.isCurrent(snapshot) {
      snapshot = context.snapshot
      router = ForwardRouter(snapshot: snapshot, listener: listener)
    }
    guard !draining else {
      try? session.submitReset(stream: id, errorCode: HTTP2ErrorCode.refusedStream)
      return
    }
    let head: HTTPRequestHead
    switch HTTP2Mapping.requestHead(block, endsStream: endsStream) {
    case .success(let mapped): head = mapped
    case .failure(.connect):
      return refuse(
        id, nil,
        ProxyFailure(
          status: 501, code: .badRequest,
          reason: "CONNECT inside HTTP/2 is not supported; open a tunnel per host"))
    case .failure(.malformed(let reason)):
      context.metrics.http2Events.increment(["downstream", "malformed"])
      return refuse(id, nil, .badRequest("malformed HTTP/2 request: \(reason)"))
    }
    // The bound an HTTP/1.1 request line gets: a long `:path` would otherwise
    // be limited only by the header list and go on to an HTTP/1.1 origin.
    let maxURILength = snapshot.httpLimits.maxURILength
    guard head.rawTarget.utf8.count <= maxURILength else {
      return refuse(id, nil, .badRequest("request target longer than \(maxURILength) bytes", status: 414))
    }
    switch router.route(head, inside: tunnel) {
    case .forward(let target):
      let stream = HTTP2ClientStream(id: id, head: head, target: target)
      stream.requestComplete = endsStream
      streams[id] = stream
      context.metrics.http2StreamsInFlight.add(1)
      // A small body of declared length is held until it is complete, so
      // that a content-length the DATA contradicts (RFC 9113 §8.1.1, which
      // nghttp2 answers with a reset) never reaches the origin at all.
      // Every stream answers within the response timeout, whatever it waits for
      // (its body, a free upstream slot); `exchange` re-arms it for the origin.
      arm(stream)
      if case .length(let length) = head.framing, !endsStream, length <= Self.heldBodyLimit {
        stream.awaitingBody = true
        return
      }
      startOrQueue(stream)
    case .refuse(let failure):
      refuse(id, head, failure)
    case .passthrough, .intercept:
      refuse(id, head, .badRequest("CONNECT inside HTTP/2 is not supported"))
    }
  }

  func retry(_ stream: HTTP2ClientStream) { acquire(stream, poolAllowed: false) }

  func acquire(_ stream: HTTP2ClientStream, poolAllowed: Bool) {
    acquirer.acquire(stream.target, poolAllowed: poolAllowed) { [weak self, weak stream] result in
      guard let self, let stream, case .connecting = stream.state, self.streams[stream.id] === stream else {
        if case .success(let acquired) = result { acquired.link.close() }
        return
      }
      switch result {
      case .failure(let failure):
        self.fail(stream, failure)
      case .success(let acquired):
        self.exchange(stream, over: acquired.link, pooled: acquired.pooled)
      }
      self.flush()
    }
  }

  private func exchange(_ stream: HTTP2ClientStream, over link: any UpstreamLink, pooled: Bool) {
    stream.state = .exchanging(link)
    stream.upstreamWasPooled = pooled
    stream.upstreamTLS = link.tls
    stream.upstreamProtocol = link.protocolName
    link.delegate = self
    byLink[ObjectIdentifier(link)] = stream
    link.sendHead(
      ForwardedRequest(
        head: stream.head, path: stream.target.path, authority: stream.target.authority,
        via: ForwardedRequest.via(.http2)))
    let waiting = stream.pendingBody
    stream.pendingBody = []
    for bytes in waiting { forward(bytes, of: stream, over: link) }
    if stream.requestComplete && stream.head.framing != .none {
      link.endBody(trailers: stream.requestTrailers)
    }
    let seconds = snapshot.timeouts.upstreamResponse
    stream.responseTimer?.cancel()
    stream.responseTimer = loop.schedule(after: seconds) { [weak self, weak stream] in
      guard let self, let stream, stream.responseStatus == nil, !stream.isDone else { return }
      self.fail(stream, .timeout("\(stream.target.key) sent no response within \(seconds) s"))
      self.flush()
    }
  }

  private func forward(_ bytes: [UInt8], of stream: HTTP2ClientStream, over link: any UpstreamLink) {
    stream.requestBodyBytes += bytes.count
    link.sendBody(bytes)
    // Flow control is the back-pressure: what the upstream has not taken
    // is not acknowledged, so the client's window for this stream closes.
    if link.isAboveHighWatermark {
      stream.unconsumed += bytes.count
    } else {
      session.consume(stream: stream.id, bytes.count)
    }
  }

  private func body(_ bytes: [UInt8], on id: Int32) {
    guard let stream = streams[id] else {
      // A refused or finished stream: its DATA is dropped, its window kept open.
      return session.consume(stream: id, bytes.count)
    }
    switch stream.state {
    case .connecting:
      stream.pendingBody.append(bytes)
    case .exchanging(let link):
      forward(bytes, of: stream, over: link)
    case .done:
      session.consume(stream: id, bytes.count)
    }
  }

  private func endOfRequest(_ id: Int32) {
    guard let stream = streams[id], !stream.requestComplete else { return }
    stream.requestComplete = true
    if let link = stream.link { link.endBody(trailers: stream.requestTrailers) }
    if stream.awaitingBody {
      stream.awaitingBody = false
      startOrQueue(stream)
    }
  }

  private func streamClosed(_ id: Int32, code: UInt32) {
    guard let stream = streams.removeValue(forKey: id) else { return }
    context.metrics.http2StreamsInFlight.add(-1)
    if code != HTTP2ErrorCode.noError {
      context.metrics.http2Events.increment(["downstream", "reset_received"])
      // An exchange the client cancelled before its answer: each one cost an
      // upstream request. Past the bucket, the connection ends (rapid reset).
      if !stream.isDone && !resets.take(now: DispatchTime.now().uptimeNanoseconds) {
        abandon(stream)
        return endForFlood()
      }
    }
    abandon(stream)
    if streams.isEmpty { becameIdle() }
  }

  /// CVE-2023-44487: too many exchanges started and cancelled by the client.
  private func endForFlood() {
    context.metrics.http2Events.increment(["downstream", "rapid_reset"])
    logBadRequest(
      .warning,
      "HTTP/2 rapid reset: more than \(ResetBucket.burst) requests cancelled in a burst; connection ended")
    draining = true
    try? session.submitGoAway(errorCode: HTTP2ErrorCode.enhanceYourCalm)
    flush()
    closeAll()
  }

  /// The client is gone from this stream: an unfinished exchange's upstream
  /// is closed (an HTTP/1.1 connection) or reset (an h2 stream).
  private func abandon(_ stream: HTTP2ClientStream) {
    stream.responseTimer?.cancel()
    if let link = stream.link {
      byLink[ObjectIdentifier(link)] = nil
      link.close()
    }
    stream.state = .done
  }

  private func becameIdle() {
    if draining { return closeAll() }
    idleTimer.schedule(after: snapshot.timeouts.idleKeepAlive)
  }

  private func idleTimeout() {
    loop.preconditionInLoop()
    guard streams.isEmpty, !closed else { return }
    try? session.submitGoAway()
    flush()
    closeAll()
  }

  private func closeAll() {
    guard !closed else { return }
    closed = true
    idleTimer.cancel()
    for stream in streams.values { abandon(stream) }
    queued.removeAll()
    reportBuffered(0)
    // The client may still be sending (the rest of a block that broke a
    // limit): closing with its bytes unread would reset the connection and
    // destroy the GOAWAY that says why. Briefly read and discard instead.
    guard let owner = client.delegate else { return client.closeAfterFlush() }
    LingeringClose.start(
      client, owner: owner, timeout: min(2, snapshot.timeouts.lingeringClose), byteLimit: 1 << 20)
  }

  /// A `refused` line for what the client did wrong at the HTTP/2 level.
  private func logBadRequest(_ level: ProxyLogger.Level, _ reason: String) {
    context.logger.log(
      level, "refused",
      [
        "client": client.peer, "target": "\(tunnel.host):\(tunnel.port)", "code": "bad-request",
        "reason": reason,
      ])
  }

  // MARK: Frames to the client (for the upstream half)

  /// The client stream `link` serves, while it is still open.
  func stream(of link: any UpstreamLink) -> HTTP2ClientStream? {
    guard let stream = byLink[ObjectIdentifier(link)], streams[stream.id] === stream else { return nil }
    return stream
  }

  func forget(_ link: any UpstreamLink) { byLink[ObjectIdentifier(link)] = nil }

  /// The response could not be started on the client stream: both ends go.
  func abandonUpstream(of stream: HTTP2ClientStream, _ link: any UpstreamLink) {
    forget(link)
    link.close()
    stream.state = .done
    try? session.submitReset(stream: stream.id, errorCode: HTTP2ErrorCode.internalError)
    flush()
  }

  // MARK: Writing

  func flush() {
    guard !closed, client.isOpen else { return }
    // A client that does not read gets nothing more queued on its socket:
    // frames wait in nghttp2, where its bounds hold (at most 1000 owed
    // PING/SETTINGS acknowledgements and resets, then GOAWAY; answers held
    // by the 100 concurrent streams), until `clientDrained`.
    if !client.isAboveHighWatermark {
      do {
        let bytes = try session.pendingOutput()
        if !bytes.isEmpty { client.write(bytes) }
      } catch {
        return closeAll()
      }
    }
    // Sending can close streams (the RST_STREAM nghttp2 queued for an
    // oversized or malformed request): they end now, not at the next read.
    let produced = session.takeEvents()
    if !produced.isEmpty { return handle(produced) }
    reportBuffered(session.bufferedBodyBytesTotal)
    startQueued()
    // Streams whose buffered response went below the bounds read their upstream again.
    for stream in streams.values where stream.upstreamPaused && !pausesUpstream(of: stream) {
      stream.upstreamPaused = false
      stream.link?.resumeReading()
    }
    if !session.isActive && !closed {
      if !clientWentAway && !draining {
        // nghttp2 ended it: a reset or CONTINUATION flood, an oversized or
        // undecodable header block, a protocol error (its GOAWAY says which).
        context.metrics.http2Events.increment(["downstream", "session_ended"])
        logBadRequest(
          .warning, "HTTP/2 connection ended by a protocol limit (reset or CONTINUATION flood, header block)")
      }
      closeAll()
    }
  }
}
