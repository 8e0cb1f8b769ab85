import Dispatch
import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinHTTP2

/// An intercepted CONNECT whose client chose `h2`: it becomes the TLS
/// channel's delegate when ALPN settles (the forward session hands the
/// connection over, with its registry entry and admission slot), and each
/// stream is an exchange of its own (`DownstreamHTTP2Stream`), routed under
/// the CONNECT host's rule to an HTTP/1.1 or HTTP/2 upstream. A refusal is
/// an answer on that stream only (status, `pinproxy-error`, a plain-text
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
/// Confined to its loop: every entry point is a channel delegate call, a
/// stream's call, an acquisition completion or a timer on `loop.queue`.
final class DownstreamHTTP2Session: ChannelDelegate, DrainableSession, HTTP2StreamHost, @unchecked Sendable {
  /// Its place in the loop's `SessionRegistry`.
  var registrySlot = RegistrySlot()
  enum State {
    case serving
    /// GOAWAY sent (shutdown, a flood): no new streams; close when the last one ends.
    case draining
    /// The client sent GOAWAY: an ending session is its choice, not a limit's.
    case clientWentAway
    case closed
  }

  let client: any ByteChannel
  let loop: EventLoop
  let session: HTTP2Session
  let context: ProxyContext
  /// Replaced by the current one before a new stream is routed (a reload governs what follows it).
  var snapshot: RuntimeSnapshot {
    didSet { acquirerUnderSnapshot = nil }
  }
  /// `acquirer`, kept while `snapshot` is in force (one per snapshot, not per stream).
  private var acquirerUnderSnapshot: UpstreamAcquirer?
  let listener: ListenerConfig
  let tunnel: ConnectTarget
  /// The proxy credential the CONNECT carried (listeners with `proxyAuth`):
  /// every stream inherits it while the file in force still accepts it.
  let credential: VerifiedCredential?
  var router: ForwardRouter
  let pool: UpstreamPool
  /// The connection's place in the admission counts, handed over by the forward session.
  private let admission: AdmissionTicket
  /// Who the client is (handed over by the forward session); its key
  /// bounds the upstream budget.
  let origin: ClientOrigin
  var clientKey: String { origin.key }
  /// This connection in the upstream budget: its first socket is its own.
  let budgetConnection = UpstreamBudget.connectionID()
  var streams: [Int32: DownstreamHTTP2Stream] = [:]
  var state = State.serving
  var resets = ResetBucket()
  private var nextExchange = 0
  private lazy var idleTimer: LoopTimer = loop.makeTimer { [weak self] in self?.idleTimeout() }
  private(set) var lastActivity = DispatchTime.now().uptimeNanoseconds
  static let maxConcurrentStreams: UInt32 = 100
  /// Streams that hold (or are acquiring) an upstream at once; later ones
  /// wait in `queued`, which `maxConcurrentStreams` bounds.
  static let maxUpstreamExchanges = 32
  var queued: [DownstreamHTTP2Stream] = []
  /// Response body buffered per stream before its upstream is paused.
  static let highWatermark = 256 * 1024
  /// Response body buffered for the whole connection before its upstreams pause.
  static let connectionBufferLimit = 1 << 20
  /// Past `UpstreamBudget.bufferedBytesLimit` in all, a connection holding
  /// more than this pauses its upstreams too.
  static let slowConnectionFloor = 64 * 1024
  /// What this connection last added to the process-wide buffered count.
  var bufferedReported = 0
  /// Streams whose upstream is paused for their buffered response: a flush
  /// looks for ones to resume only when there are some.
  private var pausedStreams = 0
  /// Streams acquiring or holding an upstream (each stream reports its own changes).
  private(set) var upstreamExchanges = 0
  /// Declared request bodies up to this size are held until complete.
  static let heldBodyLimit = 64 * 1024

  init(
    client: any ByteChannel, context: ProxyContext, snapshot: RuntimeSnapshot, listener: ListenerConfig,
    tunnel: ConnectTarget, pool: UpstreamPool, admission: AdmissionTicket, origin: ClientOrigin,
    credential: VerifiedCredential? = nil
  ) throws {
    self.credential = credential
    self.client = client
    loop = client.loop
    self.context = context
    self.snapshot = snapshot
    self.listener = listener
    self.tunnel = tunnel
    self.pool = pool
    self.admission = admission
    self.origin = origin
    router = ForwardRouter(snapshot: snapshot, listener: listener, client: origin)
    let limits = snapshot.httpLimits
    session = try HTTP2Session(
      role: .server, maxConcurrentStreams: Self.maxConcurrentStreams,
      maxHeaderListSize: UInt32(clamping: limits.maxHeaderBytes), limits: HTTP2Limits(headerLimits: limits))
  }

  /// Takes the channel over: from now on every client byte comes here.
  func start() {
    loop.preconditionInLoop()
    client.delegate = self
    context.registry(for: loop).add(self)
    flush()
    idleTimer.schedule(after: snapshot.timeouts.idleKeepAlive)
  }

  /// Each new stream is checked against the snapshot in force
  /// (`ForwardRouter.refusal`, the tunnel's credential): nothing to review.
  func reviewAccess(under snapshot: RuntimeSnapshot) {}

  var isClosed: Bool { if case .closed = state { true } else { false } }
  var isServing: Bool { if case .serving = state { true } else { false } }

  var acquirer: UpstreamAcquirer {
    if let acquirerUnderSnapshot { return acquirerUnderSnapshot }
    let made = UpstreamAcquirer(
      context: context, snapshot: snapshot, loop: loop, client: clientKey, connection: budgetConnection)
    acquirerUnderSnapshot = made
    return made
  }

  func release(_ link: any UpstreamLink) { link.release(to: UpstreamRelease(pool: pool, snapshot: snapshot)) }

  /// The verified proxy user, where `proxyAuth.logUser` lets it be logged.
  var loggedUser: String? { router.authenticator?.loggedUser(credential) }

  func nextExchangeID() -> Int {
    nextExchange += 1
    return nextExchange
  }

  // MARK: HTTP2StreamHost

  var codec: HTTP2Session { session }
  func acknowledge(_ stream: Int32, _ count: Int) { session.consume(stream: stream, count) }
  var responseTimeout: Double { snapshot.timeouts.upstreamResponse }
  func holds(_ stream: DownstreamHTTP2Stream) -> Bool { streams[stream.id] === stream }
  func upstreamPaused(_ paused: Bool) { pausedStreams += paused ? 1 : -1 }
  func upstreamSlot(taken: Bool) { upstreamExchanges += taken ? 1 : -1 }

  func report(_ record: ExchangeRecord) {
    record.report(
      to: context.logger, context.metrics, local: origin.local, peer: { origin.peer },
      listener: listener.name, loop: loop, user: loggedUser)
  }

  func refuse(_ stream: DownstreamHTTP2Stream, _ failure: ProxyFailure) {
    let exchange = stream.machine.exchange
    refuse(stream.id, exchange.request, failure, target: exchange.target, started: exchange.started)
  }

  // MARK: ChannelDelegate

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    guard !isClosed else { return }
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

  /// The client half-closed: nothing more will come; the connection ends.
  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    closeAll()
  }

  func channelDidDrain(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    flush()
  }

  /// Out of the registry at the latest now (its entries are unretained).
  deinit { context.registry(for: loop).forget(self) }

  /// The client connection ended: every exchange in progress is abandoned.
  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    state = .closed
    idleTimer.cancel()
    let open = streams.values
    streams.removeAll()
    for stream in open { stream.abandon() }
    context.metrics.http2StreamsInFlight.add(-open.count)
    queued.removeAll()
    reportBuffered(0)
    context.registry(for: loop).remove(self)
    admission.release()
  }

  // MARK: DrainableSession

  var clientPeer: String { client.peer }

  /// How expendable the connection is under overload: with no stream, an
  /// idle keep-alive connection; with only streams whose request has not
  /// finished arriving (nothing sent upstream yet), a slow one; else nil.
  var evictionCandidate: EvictionCandidate? {
    loop.preconditionInLoop()
    if streams.isEmpty { return EvictionCandidate(tier: .idleKeepAlive, since: lastActivity) }
    guard streams.values.allSatisfy({ $0.hold == .body }) else { return nil }
    return EvictionCandidate(tier: .unfinishedHead, since: lastActivity)
  }

  func evict() {
    loop.preconditionInLoop()
    context.logger.log(.debug, "evicted", ["client": client.peer, "reason": "connection limit reached"])
    client.close()
  }

  /// Graceful shutdown: GOAWAY now; the connection closes when the streams end.
  func drain() {
    loop.preconditionInLoop()
    if isServing { state = .draining }
    try? session.submitGoAway()
    flush()
    if streams.isEmpty { closeAll() }
  }

  // MARK: Ending

  func becameIdle() {
    if !isServing { return closeAll() }
    idleTimer.schedule(after: snapshot.timeouts.idleKeepAlive)
  }

  func cancelIdleTimer() { idleTimer.cancel() }

  private func idleTimeout() {
    loop.preconditionInLoop()
    guard streams.isEmpty, !isClosed else { return }
    try? session.submitGoAway()
    flush()
    closeAll()
  }

  func closeAll() {
    guard !isClosed else { return }
    state = .closed
    idleTimer.cancel()
    for stream in streams.values { stream.abandon() }
    queued.removeAll()
    reportBuffered(0)
    // The client may still be sending (the rest of a block that broke a
    // limit): closing with its bytes unread would reset the connection and
    // destroy the GOAWAY that says why. Briefly read and discard instead.
    LingeringClose.start(
      client, owner: self, timeout: min(2, snapshot.timeouts.lingeringClose), byteLimit: 1 << 20)
  }

  /// A `refused` line for what the client did wrong at the HTTP/2 level.
  func logBadRequest(_ level: ProxyLogger.Level, _ reason: String) {
    Refusal(.badRequest(reason), tunnel: tunnel).log(
      to: context.logger, context.metrics, client: origin, level: level)
  }

  // MARK: Writing

  func flush() {
    guard !isClosed, client.isOpen else { return }
    // A client that does not read gets nothing more queued on its socket:
    // frames wait in nghttp2, where its bounds hold (at most 1000 owed
    // PING/SETTINGS acknowledgements and resets, then GOAWAY; answers held
    // by the 100 concurrent streams), until `channelDidDrain`.
    if !client.isAboveHighWatermark {
      do {
        try session.sendPending { client.write($0) }
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
    if pausedStreams > 0 {
      for stream in streams.values { stream.resumeUpstreamIfAllowed() }
    }
    if !session.isActive && !isClosed {
      if isServing {
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
