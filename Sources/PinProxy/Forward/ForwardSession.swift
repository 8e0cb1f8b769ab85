import Dispatch
import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// One client connection of a forward listener: the I/O around a
/// `ForwardMachine`. Every event (client bytes, upstream events, timers,
/// dial completions) is handed to the machine, and the actions it returns
/// are carried out here, in order. It serves HTTP/1.1, plain or inside an
/// intercepted CONNECT; when a CONNECT is spliced the `Splice` becomes the
/// channels' delegate, and when an intercepted client chooses `h2` a
/// `DownstreamHTTP2Session` takes the connection over.
///
/// Confined to its loop (`loop.queue`): every entry point is a channel or
/// upstream delegate call, a timer or a dial completion on that queue, and
/// says so with `dispatchPrecondition` (through `run`).
final class ForwardSession: ChannelDelegate, ExchangeHost, DrainableSession, @unchecked Sendable {
  /// Its place in the loop's `SessionRegistry`.
  var registrySlot = RegistrySlot()
  /// The client socket. A constant, reopened on the next socket when a
  /// retired session serves the loop's next connection (`serve`); the
  /// other fields naming the connection are variables.
  let connection: Connection
  /// TLS over `connection` once an intercepted CONNECT's client started it;
  /// nil while requests are read from the socket itself. The client link is
  /// these two, concrete (`ForwardSession+Client.swift`): a plain client's
  /// reads and writes go straight to its socket, a constant, with nothing
  /// retained and no witness table, rather than through `any ByteChannel`.
  var clientTLS: TLSChannel?
  let bound: BoundListener
  var listener: ListenerConfig { bound.config }
  let context: ProxyContext
  /// The configuration in force: replaced before any event once a reload
  /// installed another, so each routing and upstream decision is made under
  /// the current policy (an exchange in flight keeps the target it has).
  var snapshot: RuntimeSnapshot
  var machine: ForwardMachine<UpstreamRef>
  /// The upstream links the machine's exchanges hold, by handle.
  var upstreams = UpstreamLinks()
  /// What the client connection is doing, beside the machine's state.
  enum Mode {
    /// Requests are read and answered (HTTP/1.1).
    case serving
    /// An intercepted CONNECT whose first bytes decide between TLS and plain HTTP.
    case awaitingTunnelBytes(PendingTunnel)
    /// A passthrough CONNECT: the splice is both channels' delegate now.
    case spliced(Splice)
    /// The connection was handed to another owner (HTTP/2) or closed.
    case ended
  }
  var mode = Mode.serving
  /// Made once, re-armed per request (see `EventLoop.makeTimer()`), its
  /// work given at the end of `init` (`timerFired`). A `let`: calls on it
  /// retain nothing. Its work holds the session strongly: nothing on a
  /// connection's path takes a weak reference to it (that would put every
  /// retain and release of it on the runtime's slow path). `stopTimers()`
  /// ends the cycle when the session stops serving.
  let timer: LoopTimer
  /// The deadline `timer` was last armed for (`followDeadline`), uptime ns.
  var armedDeadline: UInt64?
  private var running = false
  /// Response bytes in the machine's output buffer that this run asked to
  /// write, not written yet, and the upstream to stop reading should the
  /// client be backed up after them (`writeClientOutput`).
  private var clientOutputToWrite: (range: Range<Int>, pausing: UpstreamRef?)?
  /// A refusal was written: close lingeringly when the current run ends.
  private var lingerAfterRun = false
  /// A client that asked for its tunnel in another protocol (a SOCKS5
  /// client: `start(tunnel:replies:)`): the tunnel's opening, and a
  /// refusal before it, are answered in that protocol.
  private(set) var tunnelReplies: TunnelReplies?
  /// The tunnel's opening was answered: later refusals are HTTP, inside it.
  var tunnelAnswered = false
  /// A refused local client's answer, held until its program is known
  /// (see `refuse`); the lingering close starts once it is sent.
  private var heldAnswer: [UInt8]?
  /// The connection's place in the admission counts (released when its
  /// socket closes, or when it stops serving).
  let admission: AdmissionTicket
  /// `admission.release`, made once: the connection's close hook for every
  /// connection this session serves (`serve`).
  let releaseAdmission: @Sendable () -> Void

  var loop: EventLoop { connection.loop }
  /// Who the client is: its address, its admission key (routing and the
  /// upstream budget) and, on this host, its socket's owner.
  var origin: ClientOrigin
  var clientKey: String { origin.key }
  /// This connection in the upstream budget: its first socket is its own.
  var budgetConnection = UpstreamBudget.connectionID()
  /// The loop's pool, looked up once (the session never leaves its loop).
  let pool: UpstreamPool
  /// The loop's session registry and its shelf of spare machine storage,
  /// looked up once, not at every start, end and release.
  let registry: SessionRegistry
  let shelf: ForwardStorageShelf?
  /// `acquirer`, kept while `snapshot` is in force.
  var acquirerUnderSnapshot: UpstreamAcquirer?
  /// Whether the session may serve the loop's next connection once this one
  /// ended (`retireIfReusable`). Cleared on every path that hands the
  /// session to something the shelf's uniqueness check cannot see (a weak
  /// reference: a credential check, an interception's refusal hook) or that
  /// leaves plain HTTP serving (a tunnel, a splice, a lingering refusal, an
  /// answer held for a program look-up): those sessions end as before.
  var reusable = true

  convenience init(
    connection: Connection, context: ProxyContext, listener: BoundListener, admission: AdmissionTicket,
    origin: ClientOrigin
  ) {
    self.init(
      connection: connection, context: context, listener: listener, admission: admission, origin: origin,
      shelf: ForwardStorageShelf.of(connection.loop), snapshot: context.snapshot)
  }

  /// `shelf`: the loop's, when made on the loop (`serve` has it at hand);
  /// `snapshot`: the one in force, as the accept read it.
  init(
    connection: Connection, context: ProxyContext, listener: BoundListener, admission: AdmissionTicket,
    origin: ClientOrigin, shelf: ForwardStorageShelf?, snapshot: RuntimeSnapshot
  ) {
    self.connection = connection
    self.admission = admission
    releaseAdmission = admission.release
    bound = listener
    self.context = context
    self.snapshot = snapshot
    self.origin = origin
    let local = context.loopState(for: connection.loop)
    pool = local.pool
    registry = local.registry
    self.shelf = shelf
    var router = ForwardRouter(snapshot: snapshot, bound: listener, client: origin)
    router.adopt(shelf?.routeMemo)
    machine = ForwardMachine(
      router: router,
      limits: snapshot.httpLimits, timeouts: snapshot.timeouts, client: origin.key,
      clock: { [loop = connection.loop] in loop.now }, storage: shelf?.take())
    timer = connection.loop.makeTimer()
    connection.delegate = self
    timer.setWork { [self] in timerFired() }
  }

  func start() {
    run {
      registry.add(self)
      $0.start()
    }
    connection.resumeReading()
  }

  /// Starts with a tunnel already asked for in another protocol (a SOCKS5
  /// client whose handshake `SocksSession` did): `replies` answer its
  /// opening, and a refusal before it, in that protocol. The client stays
  /// paused until the tunnel opens.
  func start(tunnel request: TunnelRequest, replies: TunnelReplies) {
    reusable = false
    tunnelReplies = replies
    run {
      registry.add(self)
      $0.openTunnel(request)
    }
  }

  /// Hands one event to the machine and carries out what it asks, in order.
  /// An action that answers at once (a pooled upstream) feeds the machine
  /// again; its actions join the same queue.
  func run(_ event: (inout ForwardMachine<UpstreamRef>) -> Void) {
    loop.preconditionInLoop()
    if !context.isCurrent(snapshot) { adoptCurrentSnapshot() }
    event(&machine)
    guard !running else { return }
    running = true
    // What the actions write to the client leaves in one syscall at the end
    // (a response head and body, or a refusal), TLS records included.
    connection.cork()
    // Events the uncork or the last write cause (a drain, say) queue their
    // actions while `running`: they are carried out here, in order.
    repeat {
      while let action = machine.nextAction() { execute(action) }
      connection.uncork()
      writeClientOutput()
    } while machine.hasActions
    running = false
    machine.clientOutputWritten()
    followDeadline()
    // After every action of this run (a trailing pauseClient among them),
    // so that nothing the machine queued stops the lingering reads.
    if lingerAfterRun {
      lingerAfterRun = false
      if heldAnswer != nil { return pauseClient() }
      startLingering()
    }
  }

  /// Writes the response bytes this run asked for (`clientOutputToWrite`).
  /// Uncorked by then, they go out straight from the machine's buffer, with
  /// no copy into the connection's queue unless the socket takes only part.
  private func writeClientOutput() {
    guard let (range, upstream) = clientOutputToWrite else { return }
    clientOutputToWrite = nil
    // A reference to the machine's buffer, not an access to the machine,
    // is held while writing: a delegate call the write makes may run it.
    let output = machine.clientOutput
    output.withUnsafeBytes { writeToClient(UnsafeRawBufferPointer(rebasing: $0[range])) }
    // Back-pressure: a slow client stops the upstream being read.
    if let upstream, clientIsBackedUp { upstreams[upstream]?.pauseReading() }
  }

  /// After a refusal: the answer is out (or queued); what the client still
  /// sends is read and dropped until it closes (`LingeringClose`).
  private func startLingering() {
    LingeringClose.start(
      client, owner: self, timeout: snapshot.timeouts.lingeringClose,
      byteLimit: snapshot.limits.lingeringCloseBytes)
    // It reads no request any more: it no longer takes a client's slot.
    admission.release()
    registry.remove(self)
    stopTimers()
  }

  /// The lookup a refusal waited for has answered: the answer goes out and
  /// the connection closes lingeringly, as it would have at once.
  private func sendHeldAnswer() {
    loop.preconditionInLoop()
    guard let answer = heldAnswer else { return }
    heldAnswer = nil
    guard clientIsOpen else { return }
    writeToClient(answer)
    startLingering()
  }

  /// A reload happened: later requests are routed, and their upstreams
  /// dialled or taken from the pool, under the new snapshot only.
  private func adoptCurrentSnapshot() {
    snapshot = context.snapshot
    acquirerUnderSnapshot = nil
    machine.router = ForwardRouter(snapshot: snapshot, bound: bound, client: origin)
    machine.timeouts = snapshot.timeouts
  }

  // MARK: Client channel

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    if case .awaitingTunnelBytes(let pending) = mode {
      mode = .serving
      return startTunnel(pending, first: bytes)
    }
    run { $0.clientRead(bytes) }
  }
  func channelDidReadEOF(_ channel: any ByteChannel) { run { $0.clientEOF() } }
  func channelDidDrain(_ channel: any ByteChannel) { run { $0.clientDrained() } }

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    let wasServing = if case .serving = mode { true } else { false }
    run { $0.clientClosed() }
    ended()
    if wasServing { retireIfReusable() }
  }

  /// The client connection is gone: nothing of this session remains.
  func ended() {
    loop.preconditionInLoop()
    stopTimers()
    // The machine closes its exchange's upstream when the client goes; a
    // link it still held past that would serve no one: closed here.
    for link in upstreams.letGoAll() { link.close() }
    mode = .ended
    registry.remove(self)
    admission.release()
  }

  var clientPeer: String { connection.peer }

  /// Nothing of a run is pending: no run under way, no response bytes
  /// waiting, no lingering close or held answer to start; no tunnel.
  var isAtRest: Bool {
    !running && upstreams.isEmpty && clientOutputToWrite == nil && !lingerAfterRun && heldAnswer == nil
      && tunnelReplies == nil
      && !tunnelAnswered
  }

  /// The registry holds sessions unretained: the entry goes at the latest
  /// here. The machine's storage goes on to the loop's next session.
  deinit {
    registry.forget(self)
    // Only on the loop: a session released elsewhere frees its storage.
    if let shelf, loop.inLoop {
      if let memo = machine.router.memo { shelf.routeMemo = memo }
      shelf.put(machine.surrenderStorage())
      // Handed on only when nothing else holds it: a dial still under way
      // would otherwise finish charging its socket to the next connection.
      if acquirerUnderSnapshot != nil, isKnownUniquelyReferenced(&acquirerUnderSnapshot!) {
        shelf.acquirerMemo = (snapshot.generation, acquirerUnderSnapshot!)
      }
    }
  }

  // MARK: Actions

  /// Inlined into `run`, where the action is an owned local: its payloads
  /// are then moved out rather than the whole action copied to bind them.
  @inline(__always)
  private func execute(_ action: ForwardMachine<UpstreamRef>.Action) {
    switch action {
    case .writeClient, .upstream, .resumeUpstream, .resumeClient, .pauseClient:
      // None of these writes to or closes the client: the response's bytes may wait.
      break
    default:
      // Whatever else may write to the client, or close it, comes after
      // the response bytes asked for before it.
      writeClientOutput()
    }
    switch action {
    case .resumeClient(let upstream):
      if upstream.flatMap({ upstreams[$0] })?.isAboveHighWatermark != true { resumeClient() }
    case .pauseClient:
      pauseClient()
    case .upstream(let action):
      performUpstreamSide(action)
    case .writeClient(let range, let upstream):
      // Bytes that follow the last ones asked for in the machine's buffer
      // (a body after its head) join them: written together at the end of
      // the run, uncorked, straight from the buffer.
      if let waiting = clientOutputToWrite, waiting.range.upperBound == range.lowerBound {
        clientOutputToWrite = (waiting.range.lowerBound..<range.upperBound, upstream ?? waiting.pausing)
      } else {
        writeClientOutput()
        clientOutputToWrite = (range, upstream)
      }
    case .resumeUpstream(let upstream):
      upstreams[upstream]?.resumeReading()
    case .refuse(let refusal):
      refuse(refusal)
    case .answerPAC(let head, let listener):
      let reached = SocketAddress.local(of: connection.fd)?.addressBytes
      let proxy = PACFile.proxyAddress(listener: listener, reached: reached)
      let text = PACFile.text(snapshot: machine.router.snapshot, listener: listener, proxy: proxy)
      // Closed lingeringly after the answer, as a refusal is.
      writeToClient(PACFile.answer(text, head: head))
      lingerAfterRun = true
      reusable = false
    case .openPassthrough(let target):
      reusable = false
      openPassthrough(target)
    case .intercept(let target, let interception):
      reusable = false
      intercept(target, interception)
    case .verifyCredential(let pending, let authenticator):
      reusable = false
      // Held weakly until back on the loop: the session's last release
      // (and its deinit) must happen there, never on the hashing queue.
      let (loop, session) = (self.loop, WeakSession(self))
      authenticator.verify(pending) { decision in
        loop.execute { session.value?.run { $0.credentialChecked(decision) } }
      }
    case .closeAfterFlush:
      closeClientAfterFlush()
    case .close:
      if case .spliced(let splice) = mode { splice.close() } else { closeClient() }
    }
  }

  // MARK: ExchangeHost (the current request's exchange)

  /// Back-pressure: the client stops being read while the upstream is backed up.
  func requestBodySent(_ count: Int, backedUp: Bool) {
    if backedUp { pauseClient() }
  }

  func releaseUpstream(_ link: any UpstreamLink) {
    link.release(to: UpstreamRelease(pool: pool, snapshot: snapshot))
  }

  func forwardedRequest(exchange id: Int) -> ForwardedRequest? { machine.forwardedRequest(exchange: id) }

  func reportFinishedExchange() {
    guard let record = machine.takeFinishedRecord() else { return }
    record.report(
      to: context.logger, context.metrics, local: origin.local, peer: { origin.peer },
      listener: listener.name, loop: loop, user: loggedUser)
  }

  /// The verified proxy user, where `proxyAuth.logUser` lets it be logged.
  var loggedUser: String? { machine.router.authenticator?.loggedUser(machine.credential) }

  private func refuse(_ refusal: Refusal) {
    reusable = false
    var refusal = refusal
    refusal.detail = snapshot.refusalDetail(for: listener)
    refusal.report(
      to: context.logger, context.metrics, client: origin, answering: listener.name, loop: loop.index)
    let answer: [UInt8]
    if let tunnelReplies, !tunnelAnswered {
      answer = tunnelReplies.refused(refusal.failure)
    } else {
      var response = HTTP1Downstream(clientVersion: .http11, closing: true)
      response.refuse(refusal, at: Date())
      answer = response.takeOutput()
    }
    if let local = origin.local, !local.isResolved {
      // A refused client closes as soon as it has read its answer, and its
      // process can be gone before the lookup begun at accept reaches it:
      // the answer waits for the lookup (one scan, within
      // `LocalPrograms.walkInterval`) so the line and the page can name the
      // program that was refused.
      heldAnswer = answer
      local.whenResolved(urgent: true) { [self, loop] in loop.execute { self.sendHeldAnswer() } }
    } else {
      writeToClient(answer)
    }
    // The client may still be sending (a refused upload): close lingeringly
    // so the answer is not destroyed by a reset (LingeringClose), once this
    // run's actions are done.
    lingerAfterRun = true
  }
}

/// A session reference that crosses to another queue without keeping the
/// session alive; read it only on the session's loop.
final class WeakSession: @unchecked Sendable {
  weak var value: ForwardSession?
  init(_ value: ForwardSession) { self.value = value }
}
