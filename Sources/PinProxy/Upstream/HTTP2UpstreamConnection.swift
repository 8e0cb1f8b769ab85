import Foundation
import PinEventLoop
import PinHTTP
import PinHTTP2

/// One HTTP/2 connection to an origin: a channel already trusted by
/// `UpstreamDialer` (the trust decision is made once, before any stream),
/// the nghttp2 session, and the streams of whichever client sessions of
/// this loop ride on it (`HTTP2UpstreamPool`).
///
/// The origin's GOAWAY or an error retires the connection: no new stream
/// is opened on it, streams the origin never started fail as retryable,
/// the rest finish. While idle it is PINGed; a PING left unanswered for a
/// whole interval closes it.
///
/// Confined to its channel's loop: every entry point is a stream call or a
/// channel delegate call on `loop.queue`.
final class HTTP2UpstreamConnection: ChannelDelegate, @unchecked Sendable {
  enum State {
    case open
    /// GOAWAY received or sent: streams in progress finish, none start.
    case retiring
    case closed
  }

  let key: UpstreamKey
  let channel: any ByteChannel
  let tls: UpstreamTLS
  private let session: HTTP2Session
  private let metrics: ProxyMetrics
  weak var pool: HTTP2UpstreamPool?
  private(set) var state = State.open
  private var streams: [Int32: HTTP2UpstreamStream] = [:]
  /// Streams handed out, with or without an id yet.
  private(set) var activeStreams = 0
  private(set) var streamsOpened = 0
  /// Our own bound on streams per connection, whatever the origin allows.
  static let maxStreams: UInt32 = 128
  private var pingOutstanding = false
  private lazy var pingTimer: LoopTimer = loop.makeTimer { [weak self] in self?.pingTick() }
  /// When the last stream finished (uptime ns).
  private var idleSince: UInt64 = 0
  /// This socket's place in the upstream budget: shared by every stream, so
  /// it counts only in the total, from the dial until the socket closes.
  var charge: UpstreamCharge?
  /// Streams reset for an oversized response header block, until they close.
  private var oversized: Set<Int32> = []

  /// - Parameter limits: the response header bounds, the same an HTTP/1.1 origin's responses get.
  init(key: UpstreamKey, dialed: DialedUpstream, limits: HTTPLimits, metrics: ProxyMetrics) throws {
    self.key = key
    channel = dialed.channel
    tls = dialed.tls
    self.metrics = metrics
    session = try HTTP2Session(
      role: .client, maxConcurrentStreams: 0, maxHeaderListSize: UInt32(clamping: limits.maxHeaderBytes),
      limits: HTTP2Limits(headerLimits: limits))
    channel.delegate = self
    channel.resumeReading()
    metrics.upstreamConnections.increment([WireProtocol.http2.rawValue])
    flush()
  }

  var loop: EventLoop { channel.loop }
  var isAboveHighWatermark: Bool { channel.isAboveHighWatermark }

  /// Room for one more stream: open, and below both the origin's
  /// SETTINGS_MAX_CONCURRENT_STREAMS and ours.
  var hasCapacity: Bool {
    guard case .open = state, channel.isOpen else { return false }
    return activeStreams < Int(min(session.peerMaxConcurrentStreams, Self.maxStreams))
  }

  /// A stream slot for one exchange; nil without capacity.
  func reserveStream() -> HTTP2UpstreamStream? {
    loop.preconditionInLoop()
    guard hasCapacity else { return nil }
    let stream = HTTP2UpstreamStream(connection: self, reused: streamsOpened > 0)
    activeStreams += 1
    streamsOpened += 1
    metrics.http2StreamsInFlight.add(1)
    pingTimer.cancel()
    return stream
  }

  // MARK: Stream operations

  func submit(_ stream: HTTP2UpstreamStream, _ block: [HTTP2Header], hasBody: Bool) -> Int32? {
    loop.preconditionInLoop()
    guard case .open = state, let id = try? session.submitRequest(block, streaming: hasBody) else {
      return nil
    }
    streams[id] = stream
    flush()
    return id
  }

  func sendBody(stream id: Int32, _ bytes: [UInt8]) {
    session.sendBody(stream: id, bytes)
    flush()
  }

  func endBody(stream id: Int32, trailers: [HTTP2Header]) {
    session.endBody(stream: id, trailers: trailers)
    flush()
  }

  func bufferedBodyBytes(stream id: Int32) -> Int { session.bufferedBodyBytes(stream: id) }

  /// `flushing: false` while a read is being handled: its WINDOW_UPDATEs
  /// leave with the one flush at the end of the read, not one write per frame.
  func consume(stream id: Int32, _ count: Int, flushing: Bool = true) {
    session.consume(stream: id, count)
    if flushing { flush() }
  }

  func reset(stream id: Int32) {
    try? session.submitReset(stream: id, errorCode: HTTP2ErrorCode.cancel)
    streams[id] = nil
    flush()
  }

  /// A stream's exchange is over (or abandoned): its slot is free again.
  func finished(_ stream: HTTP2UpstreamStream) {
    loop.preconditionInLoop()
    guard activeStreams > 0, stream.connectionSlotHeld else { return }
    stream.connectionSlotHeld = false
    activeStreams -= 1
    metrics.http2StreamsInFlight.add(-1)
    switch state {
    case .retiring where activeStreams == 0: close()
    case .open where activeStreams == 0: becameIdle()
    default: break
    }
  }

  // MARK: Writing

  /// Hands nghttp2's pending frames to the channel, unless the channel is
  /// backed up (then `channelDidDrain` resumes): nghttp2 keeps DATA until
  /// asked, so the socket's buffer is the only one that grows, and only
  /// up to the high watermark.
  private func flush() {
    guard channel.isOpen, !channel.isAboveHighWatermark else { return }
    do {
      try session.sendPending { channel.write($0) }
    } catch {
      return fail(.unreachable("HTTP/2 error towards \(key)", detail: error.description))
    }
    // Sending can close streams (the RST_STREAM nghttp2 queued for a
    // malformed or oversized response): their exchanges end now, not at
    // the origin's next frame.
    let produced = session.takeEvents()
    if !produced.isEmpty { return handle(produced) }
    for stream in streams.values where stream.reportsDrain && !stream.isAboveHighWatermark {
      stream.reportsDrain = false
      stream.delegate?.upstreamDidDrain(stream)
    }
    if !session.isActive { close() }
  }

  // MARK: ChannelDelegate

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    let events: [HTTP2Event]
    do {
      events = try session.receive(bytes)
    } catch {
      return fail(.unreachable("malformed HTTP/2 from \(key)", detail: error.description))
    }
    handle(events)
  }

  /// Applies the origin's events to the streams, flushes, then tells each
  /// stream's exchange what happened to it.
  private func handle(_ events: [HTTP2Event]) {
    var touched: [HTTP2UpstreamStream] = []
    var closings: [ObjectIdentifier: ProxyFailure] = [:]
    func note(_ stream: HTTP2UpstreamStream) {
      if !touched.contains(where: { $0 === stream }) { touched.append(stream) }
    }
    for event in events {
      switch event {
      case .headers(let id, let block):
        guard let stream = streams[id] else { continue }
        stream.received(headers: block)
        note(stream)
      case .data(let id, let bytes):
        guard let stream = streams[id] else {
          session.consume(stream: id, bytes.count)
          continue
        }
        stream.received(data: bytes)
        note(stream)
      case .endStream(let id):
        guard let stream = streams[id] else { continue }
        stream.receivedEnd()
        note(stream)
      case .streamClosed(let id, let code):
        guard let stream = streams.removeValue(forKey: id) else { continue }
        if code != HTTP2ErrorCode.noError { metrics.http2Events.increment(["upstream", "reset_received"]) }
        // The reason is built only for a stream that had not ended (the
        // normal close of every completed exchange builds nothing).
        let wasOversized = oversized.remove(id) != nil
        if let failure = stream.closedByPeer(
          failure: wasOversized
            ? .unreachable("\(key) sent a response header block over the limits", detail: "RST_STREAM sent")
            : .unreachable("\(key) reset the HTTP/2 stream", detail: "RST_STREAM error code \(code)"),
          unprocessed: code == HTTP2ErrorCode.refusedStream)
        {
          closings[ObjectIdentifier(stream)] = failure
        }
        note(stream)
      case .goAway(let last, let code):
        metrics.http2Events.increment(["upstream", "goaway"])
        retire()
        // Streams above `last` were never started by the origin (RFC 9113 §6.8).
        for (id, stream) in streams where id > last {
          streams[id] = nil
          if let failure = stream.closedByPeer(
            failure: .unreachable(
              "\(key) went away before this request", detail: "GOAWAY error code \(code), last stream \(last)"
            ),
            unprocessed: true)
          {
            closings[ObjectIdentifier(stream)] = failure
          }
          note(stream)
        }
      case .pingAcknowledged:
        pingOutstanding = false
      case .refused:
        metrics.http2Events.increment(["upstream", "malformed"])
      case .oversizedHeaders(let id):
        // Reset by the session; the exchange fails when the stream closes.
        metrics.http2Events.increment(["upstream", "oversized_headers"])
        oversized.insert(id)
      case .settings:
        break
      }
    }
    flush()
    for stream in touched {
      let failure = closings[ObjectIdentifier(stream)]
      stream.deliver(closing: failure)
      // A stream that failed gives its slot back even if nobody closes it
      // (an exchange retried elsewhere, a session already gone).
      if failure != nil { finished(stream) }
    }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    fail(.unreachable("\(key) closed the HTTP/2 connection"))
  }

  func channelDidDrain(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    flush()
  }

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    fail(
      error.map { UpstreamConnection.failure($0, key: key) }
        ?? .unreachable("\(key) closed the HTTP/2 connection"))
  }

  // MARK: Lifecycle

  /// No new streams; the connection closes when the last one finishes.
  func retire() {
    guard case .open = state else { return }
    state = .retiring
    pool?.remove(self)
    if activeStreams == 0 { close() }
  }

  /// Closes now; every stream still waiting for its response fails with
  /// `failure` (retryable when the origin had not answered it).
  private func fail(_ failure: ProxyFailure) {
    let waiting = streams
    streams.removeAll()
    close()
    for stream in waiting.values {
      let reason = stream.closedByPeer(failure: failure, unprocessed: false)
      stream.deliver(closing: reason)
      finished(stream)
    }
  }

  func close() {
    guard state != .closed else { return }
    state = .closed
    charge?.releaseAll()
    pingTimer.cancel()
    pool?.remove(self)
    try? session.submitGoAway()
    if channel.isOpen { try? session.sendPending { channel.write($0) } }
    channel.closeAfterFlush()
  }

  // MARK: Idle health

  private func becameIdle() {
    guard let pool else { return close() }
    idleSince = DispatchTime.now().uptimeNanoseconds
    pingOutstanding = false
    pingTimer.schedule(after: pool.pingInterval)
  }

  /// Every interval while idle: past the idle timeout the connection
  /// closes; otherwise the previous PING must have been answered, and a
  /// new one goes out (RFC 9113 §6.7).
  private func pingTick() {
    loop.preconditionInLoop()
    guard case .open = state, activeStreams == 0, let pool else { return }
    let idleSeconds = Double(DispatchTime.now().uptimeNanoseconds &- idleSince) / 1e9
    if idleSeconds >= pool.idleTimeout { return close() }
    if pingOutstanding {
      metrics.http2Events.increment(["upstream", "ping_unanswered"])
      return close()
    }
    pingOutstanding = true
    try? session.submitPing()
    flush()
    pingTimer.schedule(after: min(pool.pingInterval, pool.idleTimeout - idleSeconds))
  }
}

extension HTTP2UpstreamConnection.State: Equatable {}
