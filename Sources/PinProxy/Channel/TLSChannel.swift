import PinEventLoop
import PinTLS

/// TLS over a connection, in either role: the server side towards a client
/// (an intercepted CONNECT, a tunnel listener with `downstreamTLS`) or the
/// client side towards an origin. One pump for both: ciphertext in, the
/// handshake (bounded by a timer, with the role's checks), then a read loop
/// that hands plaintext to the delegate, and a flush after every step.
///
/// Fail closed: no application byte is read or written before the
/// handshake completed and `Checks.established` accepted it; a check that
/// refuses closes the socket and reports the refusal to the handshake's
/// completion, never to the delegate as data.
///
/// Confined to its loop (`loop.queue`): every entry point is a ByteChannel
/// member or a connection delegate call, all on that queue. Holds its
/// delegate strongly until `channelDidClose`, like `Connection`.
final class TLSChannel: ByteChannel, ChannelDelegate, @unchecked Sendable {
  /// Why a handshake did not complete.
  enum HandshakeFailure: Error {
    case tls(TLSEngine.Failure)
    case timedOut(seconds: Double)
    /// The peer closed (FIN) before the handshake completed.
    case closedByPeer
    /// The socket closed or failed during the handshake.
    case closed((any Error)?)
    /// One of the `Checks` refused the peer.
    case refused(ProxyFailure)
  }

  /// What the role checks of its peer; nil accepts.
  struct Checks {
    /// After each handshake step and before its output is sent. The server
    /// role refuses a ClientHello naming another host here, so the leaf
    /// minted for the CONNECT host is never sent under another name.
    var beforeFlight: (TLSEngine) -> ProxyFailure? = { _ in nil }
    /// Once the handshake is complete, before any application byte: where
    /// an upstream's trust decision is taken (`UpstreamTrust`).
    var established: (TLSEngine) -> Verdict = { _ in .accept }
  }

  /// What the `established` check decided.
  enum Verdict {
    case accept
    case refuse(ProxyFailure)
    /// The decision needs information from elsewhere (revocation fetches):
    /// `start` is called once with a callback to call once, on the loop's
    /// queue, with the refusal or nil. Nothing is read from the peer
    /// meanwhile, and the handshake timer still bounds the wait.
    case wait(start: (@escaping (ProxyFailure?) -> Void) -> Void)
  }

  typealias Completion = (Result<Void, HandshakeFailure>) -> Void

  private enum State {
    case idle
    case handshaking(LoopTimer, Completion)
    /// Handshake complete, the `established` check waiting (`Verdict.wait`).
    case verifying(LoopTimer, Completion)
    case open
    case closed
  }

  private var handshakeInProgress: (LoopTimer, Completion)? {
    switch state {
    case .handshaking(let timer, let completion), .verifying(let timer, let completion):
      return (timer, completion)
    default: return nil
    }
  }

  let connection: Connection
  let engine: TLSEngine
  private let checks: Checks
  var delegate: (any ChannelDelegate)?
  /// Keeps the session for resumption (client role); called after the
  /// handshake, after each response and before a graceful close, because
  /// TLS 1.3 tickets arrive after the handshake.
  var storeSession: ((TLSEngine) -> Void)?
  private var state = State.idle
  private var closeError: (any Error)?

  init(connection: Connection, engine: TLSEngine, checks: Checks = Checks()) {
    self.connection = connection
    self.engine = engine
    self.checks = checks
  }

  var loop: EventLoop { connection.loop }
  var peer: String { connection.peer }
  var isOpen: Bool { if case .open = state { connection.isOpen } else { false } }
  var pendingOutputBytes: Int { connection.pendingOutputBytes }
  var isAboveHighWatermark: Bool { connection.isAboveHighWatermark }
  var hasBufferedInput: Bool { engine.hasBufferedInput }
  /// The HTTP version ALPN settled on: HTTP/1.1 unless `h2` was chosen.
  var negotiatedProtocol: WireProtocol { WireProtocol(alpn: engine.selectedApplicationProtocol) }
  func hasUnreadInput() -> Bool {
    loop.preconditionInLoop()
    return connection.hasUnreadInput()
  }

  /// Takes over the socket and starts the handshake; `early` are bytes read
  /// before TLS began (after a CONNECT head). `completion` runs once.
  func start(early: [UInt8] = [], timeout: Double, _ completion: @escaping Completion) {
    loop.preconditionInLoop()
    connection.delegate = self
    // Held strongly until the timer fires or is cancelled (the handshake
    // ends, or the channel closes): a weak reference would put every retain
    // and release of this channel, for its whole life, on the slow path.
    let timer = loop.schedule(after: timeout) { [self] in
      failHandshake(.timedOut(seconds: timeout), closeNow: true)
    }
    state = .handshaking(timer, completion)
    connection.resumeReading()
    // A client speaks first: its first flight goes out now.
    step()
    if !early.isEmpty { early.withUnsafeBytes { channel(connection, didReadBuffer: $0) } }
  }

  func rememberSession() {
    loop.preconditionInLoop()
    if engine.isHandshakeComplete { storeSession?(engine) }
  }

  // MARK: ByteChannel

  func write(_ bytes: [UInt8]) {
    bytes.withUnsafeBytes { write($0) }
  }

  func write(_ bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    guard isOpen, !bytes.isEmpty else { return }
    do {
      try engine.write(bytes)
    } catch {
      return fail(error)
    }
    flush()
  }

  func shutdownOutput() {
    loop.preconditionInLoop()
    if isOpen {
      engine.close()
      flush()
    }
    connection.shutdownOutput()
  }

  func closeAfterFlush() {
    loop.preconditionInLoop()
    if isOpen {
      // OpenSSL marks the session of a connection freed without close_notify as not resumable.
      rememberSession()
      engine.close()
      flush()
    }
    handshakeInProgress?.0.cancel()
    state = .closed
    connection.closeAfterFlush()
  }

  func close() {
    loop.preconditionInLoop()
    handshakeInProgress?.0.cancel()
    state = .closed
    connection.close()
  }

  func pauseReading() {
    loop.preconditionInLoop()
    connection.pauseReading()
  }
  func resumeReading() {
    loop.preconditionInLoop()
    connection.resumeReading()
  }

  // MARK: The pump

  /// Sends what the engine produced, in one write from where OpenSSL put
  /// it (the socket copies only what it could not send at once).
  private func flush() {
    engine.takeOutput { connection.write($0) }
  }

  /// One handshake step: refused by a check, failed, waiting, or complete.
  private func step() {
    guard case .handshaking(let timer, let completion) = state else { return }
    let progress: TLSEngine.Progress
    do {
      progress = try engine.handshake()
    } catch {
      // The alert OpenSSL queued tells the peer why.
      flush()
      return failHandshake(.tls(error), closeNow: false)
    }
    if let refusal = checks.beforeFlight(engine) {
      return failHandshake(.refused(refusal), closeNow: true)
    }
    flush()
    guard progress == .complete else { return }
    switch checks.established(engine) {
    case .accept:
      timer.cancel()
      state = .open
      completion(.success(()))
    case .refuse(let refusal):
      failHandshake(.refused(refusal), closeNow: true)
    case .wait(let start):
      state = .verifying(timer, completion)
      connection.pauseReading()
      start { [self] refusal in
        loop.preconditionInLoop()
        guard case .verifying(let timer, let completion) = state else { return }
        if let refusal { return failHandshake(.refused(refusal), closeNow: true) }
        timer.cancel()
        state = .open
        connection.resumeReading()
        completion(.success(()))
      }
    }
  }

  private func failHandshake(_ failure: HandshakeFailure, closeNow: Bool) {
    guard let (timer, completion) = handshakeInProgress else { return }
    timer.cancel()
    state = .closed
    if closeNow { connection.close() } else { connection.closeAfterFlush() }
    completion(.failure(failure))
  }

  /// An established session broke: closed now, the error goes to the delegate.
  private func fail(_ error: any Error) {
    closeError = error
    handshakeInProgress?.0.cancel()
    state = .closed
    connection.close()
  }

  // MARK: ChannelDelegate (the socket)

  /// Ciphertext from the socket's read buffer is lent to the engine, which
  /// reads its records in place; the plaintext is decrypted into the loop's
  /// plaintext buffer and handed to the delegate in place (valid during the
  /// call, like the socket's). The loan ends before the delegate runs, so
  /// whatever the delegate does with the loop's buffers cannot reach
  /// ciphertext not yet read: the plaintext buffer is as large as the read
  /// buffer, so one read takes a whole loan but for a record still partly
  /// received, which OpenSSL keeps.
  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    let plaintext = loop.plaintextBuffer
    var (count, progress) = (0, TLSEngine.Progress.wantsInput)
    do throws(TLSEngine.Failure) {
      try engine.lending(bytes) { () throws(TLSEngine.Failure) in
        if case .handshaking = state { step() }
        guard isOpen else { return }
        (count, progress) = try engine.read(into: plaintext)
      }
      while isOpen {
        flush()
        if count > 0 {
          delegate?.channel(self, didReadBuffer: UnsafeRawBufferPointer(rebasing: plaintext[..<count]))
        }
        if progress == .closed { return delegate?.channelDidReadEOF(self) ?? () }
        if count == 0 || progress == .wantsInput || !isOpen { return }
        (count, progress) = try engine.read(into: plaintext)
      }
    } catch {
      fail(error)
    }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    if handshakeInProgress != nil { return failHandshake(.closedByPeer, closeNow: true) }
    delegate?.channelDidReadEOF(self)
  }

  func channelDidDrain(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    delegate?.channelDidDrain(self)
  }

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    failHandshake(.closed(error), closeNow: true)
    state = .closed
    let owner = delegate
    delegate = nil
    storeSession = nil
    owner?.channelDidClose(self, error: closeError ?? error)
  }
}
