import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// What an upstream connection reports to the session using it (on its loop).
protocol UpstreamDelegate: AnyObject {
  /// Response events (HTTP mode).
  func upstream(_ upstream: UpstreamConnection, didReceive events: [HTTP1Parser.Event])
  /// Plaintext bytes (tunnel mode).
  func upstream(_ upstream: UpstreamConnection, didReceiveRaw bytes: [UInt8])
  func upstreamDidDrain(_ upstream: UpstreamConnection)
  /// The upstream finished sending (EOF or close_notify) in tunnel mode.
  func upstreamDidFinishSending(_ upstream: UpstreamConnection)
  /// Closed; `failure` says why when it broke a message in progress.
  func upstreamDidClose(_ upstream: UpstreamConnection, failure: ProxyFailure?)
}

/// One connection to an origin: TCP, TLS when the route asks for it (and
/// the trust decision taken before it is handed out), and a response parser.
/// Confined to its loop: every entry point runs on `loop.queue`, hence `@unchecked Sendable`.
final class UpstreamConnection: ConnectionDelegate, @unchecked Sendable {
  enum State {
    case handshaking(LoopTimer, (Result<UpstreamConnection, ProxyFailure>) -> Void)
    case ready
    case closed
  }

  enum Mode { case http, raw }

  let key: UpstreamKey
  let connection: Connection
  let engine: TLSEngine?
  let route: UpstreamRoute
  let trustEngine: TrustEngine
  let sessions: TLSSessionCache
  let metrics: ProxyMetrics
  var mode = Mode.http
  weak var delegate: UpstreamDelegate?
  private(set) var state: State = .ready
  private var parser: HTTP1Parser
  private(set) var reusedFromPool = false
  private(set) var sawEndOfStream = false

  init(
    key: UpstreamKey, connection: Connection, engine: TLSEngine?, route: UpstreamRoute,
    trustEngine: TrustEngine,
    sessions: TLSSessionCache, metrics: ProxyMetrics, limits: HTTPLimits
  ) {
    self.key = key
    self.connection = connection
    self.engine = engine
    self.route = route
    self.trustEngine = trustEngine
    self.sessions = sessions
    self.metrics = metrics
    parser = HTTP1Parser(role: .response, limits: limits, pausesBetweenMessages: true)
    connection.delegate = self
  }

  var loop: EventLoop { connection.loop }
  var isOpen: Bool { if case .ready = state { return connection.state == .open } else { return false } }
  /// Idle and clean: nothing of a response pending, no EOF seen.
  /// An origin that sent anything past the end of its response (an unsolicited
  /// response, say) is out of step with its requests: never reused, or the
  /// next client would receive what was sent for nobody. Bytes already read
  /// show here; bytes still in the kernel are asked about once, at reuse
  /// (`hasNoUnreadInput`), not at every check.
  var isReusable: Bool {
    isOpen && parser.isIdle && !sawEndOfStream && connection.pendingOutputBytes == 0
      && !(engine?.hasBufferedInput ?? false)
  }

  /// Nothing (not even a FIN) waits in the kernel: a syscall, so only when a
  /// pooled connection is taken for a new request.
  var hasNoUnreadInput: Bool { !connection.hasUnreadInput() }
  var isAboveHighWatermark: Bool { connection.isAboveHighWatermark }
  var sessionResumed: Bool { engine?.sessionReused ?? false }

  func markReused() { reusedFromPool = true }

  // MARK: Handshake

  /// Starts TLS (or completes at once for plain HTTP). The completion runs
  /// once: with the connection after the chain was accepted, or a failure.
  func start(
    handshakeTimeout: Double, _ completion: @escaping (Result<UpstreamConnection, ProxyFailure>) -> Void
  ) {
    loop.preconditionInLoop()
    connection.resumeReading()
    guard engine != nil else { return completion(.success(self)) }
    let timer = loop.schedule(after: handshakeTimeout) { [weak self] in
      self?.failHandshake(
        .timeout(
          "TLS handshake with \(self?.key.description ?? "upstream") took longer than \(handshakeTimeout) s"))
    }
    state = .handshaking(timer, completion)
    continueHandshake()
  }

  private func continueHandshake() {
    guard case .handshaking = state, let engine else { return }
    do {
      let progress = try engine.handshake()
      flushTLS()
      guard progress == .complete else { return }
      finishHandshake(engine)
    } catch {
      let code = HandshakeDiagnosis.code(
        for: error, engine: engine, requiresForwardSecrecy: route.context?.requiresForwardSecrecy ?? true)
      failHandshake(.handshake(code, key.description, detail: error.description))
    }
  }

  /// The trust decision, before any request byte: the policy (through the
  /// fingerprint cache), then the ATS key strength unless the rule accepts
  /// invalid certificates.
  private func finishHandshake(_ engine: TLSEngine) {
    let presented = engine.peerChain()
    let chain = PresentedChain(presented.map(\.der))
    // A TLS route always has a policy; without one nothing could be accepted.
    guard let policy = route.policy else {
      return failHandshake(
        ProxyFailure(status: 502, code: .untrustedChain, reason: "no trust policy for \(key)"))
    }
    let decision = policy.evaluate(chain, host: route.host, engine: trustEngine, at: Date())
    if case .rejected(let failure) = decision {
      return failHandshake(.refused(failure, presented: presented))
    }
    if route.checksKeyStrength, let weakness = HandshakeDiagnosis.weakness(of: presented) {
      return failHandshake(
        ProxyFailure(status: 502, code: .weakKey, reason: weakness, chain: ProxyFailure.describe(presented)))
    }
    guard case .handshaking(let timer, let completion) = state else { return }
    timer.cancel()
    state = .ready
    metrics.increment("pinproxy_upstream_handshakes_total", [engine.sessionReused ? "resumed" : "full"])
    rememberSession()
    completion(.success(self))
  }

  private func failHandshake(_ failure: ProxyFailure) {
    guard case .handshaking(let timer, let completion) = state else { return }
    timer.cancel()
    state = .closed
    connection.close()
    completion(.failure(failure))
  }

  // MARK: Data

  /// Prepares the parser for the response to a new request.
  func expectResponse(to method: String) {
    parser.expectResponse(to: method)
    // Paused after the previous response with nothing buffered (else not reusable).
    _ = try? parser.resume()
  }

  func send(_ bytes: [UInt8]) {
    guard isOpen, !bytes.isEmpty else { return }
    if let engine {
      do {
        try engine.write(bytes)
      } catch {
        return abort(.unreachable("TLS write to \(key) failed", detail: error.description))
      }
      flushTLS()
    } else {
      connection.write(bytes)
    }
  }

  /// Tunnel mode: the client finished sending; pass the half-close on.
  func finishSending() {
    guard isOpen else { return }
    if let engine {
      engine.close()
      flushTLS()
    }
    connection.shutdownOutput()
  }

  /// Keeps the TLS session for resumption. TLS 1.3 tickets arrive after the
  /// handshake, so this is called again once a response has been read.
  func rememberSession() {
    guard let engine, let session = TLSSession(from: engine) else { return }
    sessions.store(session, for: key)
  }

  func pauseReading() { connection.pauseReading() }
  func resumeReading() { connection.resumeReading() }

  /// Closes without telling the delegate (the caller is the one closing).
  /// An established TLS session sends close_notify first: OpenSSL marks the
  /// session of a connection freed without it as not resumable.
  func close() {
    if case .closed = state { return }
    let wasReady = isOpen
    state = .closed
    if wasReady, let engine, engine.isHandshakeComplete {
      // Tunnels read no HTTP response, so this is where their TLS 1.3 ticket is kept.
      rememberSession()
      engine.close()
      connection.write(engine.pendingOutput())
      connection.closeAfterFlush()
    } else {
      connection.close()
    }
  }

  func abort(_ failure: ProxyFailure) {
    let wasOpen = isOpen
    close()
    if wasOpen { delegate?.upstreamDidClose(self, failure: failure) }
  }

  private func flushTLS() {
    guard let engine else { return }
    let output = engine.pendingOutput()
    if !output.isEmpty { connection.write(output) }
  }

  private func deliver(_ plaintext: [UInt8]) {
    guard !plaintext.isEmpty else { return }
    switch mode {
    case .raw:
      delegate?.upstream(self, didReceiveRaw: plaintext)
    case .http:
      do {
        let events = try parser.feed(plaintext)
        if !events.isEmpty { delegate?.upstream(self, didReceive: events) }
        if isOpen && parser.isPaused && parser.hasBufferedInput {
          // Bytes after a complete response that nobody asked for.
          close()
          delegate?.upstreamDidClose(self, failure: nil)
        }
      } catch {
        abort(.unreachable("malformed response from \(key)", detail: error.reason))
      }
    }
  }

  private func endOfStream() {
    sawEndOfStream = true
    switch mode {
    case .raw:
      delegate?.upstreamDidFinishSending(self)
    case .http:
      do {
        let events = try parser.finish()
        if !events.isEmpty { delegate?.upstream(self, didReceive: events) }
        close()
        delegate?.upstreamDidClose(self, failure: nil)
      } catch {
        abort(.unreachable("\(key) closed the connection before the response was complete"))
      }
    }
  }

  // MARK: ConnectionDelegate

  func connection(_ connection: Connection, didRead bytes: [UInt8]) {
    guard let engine else { return deliver(bytes) }
    engine.receive(bytes)
    if case .handshaking = state { continueHandshake() }
    guard isOpen else { return }
    do {
      while true {
        let (plaintext, progress) = try engine.read()
        flushTLS()
        deliver(plaintext)
        if progress == .closed { return endOfStream() }
        if plaintext.isEmpty || !isOpen { return }
      }
    } catch {
      abort(UpstreamConnection.failure(afterHandshake: error, key: key))
    }
  }

  /// An alert after our side finished the handshake is still the server
  /// refusing the session (with TLS 1.3 a missing client certificate is
  /// reported this way); anything else broke an established connection.
  static func failure(afterHandshake error: TLSEngine.Failure, key: UpstreamKey) -> ProxyFailure {
    if error.isAlertFromPeer {
      return ProxyFailure(
        status: 502, code: .handshakeFailed, reason: "\(key) refused the TLS session",
        detail: error.description)
    }
    return .unreachable("TLS error from \(key)", detail: error.description)
  }

  func connectionDidReadEOF(_ connection: Connection) {
    if case .handshaking = state {
      return failHandshake(
        .handshake(
          .handshakeFailed, key.description, detail: "the server closed the connection during the handshake"))
    }
    endOfStream()
  }

  func connectionDidDrain(_ connection: Connection) { delegate?.upstreamDidDrain(self) }

  func connectionDidClose(_ connection: Connection, error: SocketError?) {
    if case .handshaking = state {
      return failHandshake(.cannotConnect(key.description, detail: error?.description ?? "closed"))
    }
    guard isOpenOrReady else { return }
    state = .closed
    delegate?.upstreamDidClose(
      self, failure: error.map { .unreachable("connection to \(key) failed", detail: $0.description) })
  }

  private var isOpenOrReady: Bool { if case .ready = state { return true } else { return false } }
}
