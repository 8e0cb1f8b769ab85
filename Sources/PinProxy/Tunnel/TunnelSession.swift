import Dispatch
import PinConfig
import PinEventLoop
import PinTLS
import PinTrust

/// One client connection of a tunnel listener: spliced (`Splice`), as raw
/// bytes, to the listener's fixed upstream over TLS under that host's
/// policy. Until the upstream is ready the session reads the client itself,
/// keeping what it sends (bounded) for the splice.
///
/// Confined to its loop (`loop.queue`): every entry point is a channel
/// delegate call, a timer or the dial completion on that queue.
final class TunnelSession: ChannelDelegate, DrainableSession, @unchecked Sendable {
  enum State {
    /// Dialling the upstream; `early` holds what the client sent meanwhile.
    case connecting(early: [UInt8], clientFinished: Bool)
    case spliced(Splice)
    case closed
  }

  /// What a client may send before the upstream is ready; reading stops beyond it.
  static let earlyLimit = 256 * 1024

  let connection: Connection
  /// The socket, or TLS over it when the listener has `downstreamTLS: true`.
  var client: any ByteChannel
  let listener: ListenerConfig
  let context: ProxyContext
  let snapshot: RuntimeSnapshot
  let target: HostPort
  var state = State.connecting(early: [], clientFinished: false)
  /// Until the client's first byte: a silent client may hold the tunnel (and
  /// its upstream connection) only for `timeouts.clientHeader`, not for
  /// `tunnelIdle`, and is the first to go when connections run out. The
  /// upstream is still dialled at once, as HAProxy and stunnel do, so that
  /// protocols where the server speaks first (SMTP, IMAP) work.
  var firstByteTimer: LoopTimer?
  var clientSpoke = false
  let accepted = DispatchTime.now().uptimeNanoseconds

  var loop: EventLoop { connection.loop }

  init(connection: Connection, context: ProxyContext, listener: ListenerConfig, target: HostPort) {
    self.connection = connection
    client = connection
    self.listener = listener
    self.context = context
    self.target = target
    snapshot = context.snapshot
    connection.delegate = self
  }

  func start() {
    loop.preconditionInLoop()
    context.registry(for: loop).add(self)
    guard let host = TrustHost(target.host) else {
      return refuse(.badRequest("\(target.host) is not a valid host"))
    }
    guard var route = UpstreamRoute(host: host, snapshot: snapshot) else { return refuse(.denied(host)) }
    // The operator named this upstream in the listener itself.
    route.namedExplicitly = true
    let seconds = snapshot.timeouts.clientHeader
    firstByteTimer = loop.schedule(after: seconds) { [weak self] in
      guard let self, !self.clientSpoke else { return }
      self.context.logger.log(
        .info, "tunnel-closed",
        ["client": self.connection.peer, "reason": "client sent nothing within \(seconds) s"])
      self.close()
    }
    if listener.downstreamTLS {
      guard let interception = snapshot.interception[listener.name] else {
        return refuse(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "no local CA for downstream TLS"))
      }
      do {
        let engine = try interception.makeEngine(presenting: try interception.ca.leaf(for: host))
        // The client's handshake proceeds while the upstream connects.
        client = TLSChannel.serve(
          connection, engine: engine, host: host, target: host.description, logger: context.logger,
          owner: self,
          early: [], timeout: snapshot.timeouts.tlsHandshake)
      } catch {
        return refuse(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "cannot serve TLS for \(host): \(error)"))
      }
    } else {
      connection.resumeReading()
    }
    let key = UpstreamKey(host: host, port: target.port, tls: true, policy: route.identity)
    context.dialer(for: snapshot).open(key, route: route, on: loop) { [weak self] result in
      guard let self, case .connecting(let early, let clientFinished) = self.state else {
        if case .success(let upstream) = result { upstream.close() }
        return
      }
      switch result {
      case .failure(let failure):
        self.refuse(failure, rule: route.ruleName)
      case .success(let upstream):
        self.state = .spliced(
          Splice(
            client: self.client, upstream: upstream, idleLimit: self.snapshot.timeouts.tunnelIdle,
            early: early,
            clientFinished: clientFinished
          ) { [self] upstreamError in
            if let upstreamError {
              let reason = UpstreamConnection.failure(upstreamError, key: key).reason
              self.context.logger.log(
                .info, "tunnel-closed", ["client": self.connection.peer, "reason": reason])
            }
            self.ended()
          })
        if case .spliced(let splice) = self.state {
          splice.onClientBytes = { [weak self] in self?.noteClientSpoke() }
        }
      }
    }
  }

  /// Refusals close the client connection; the reason goes to the log.
  private func refuse(_ failure: ProxyFailure, rule: String = "-") {
    context.metrics.refusal(failure, rule: rule)
    context.logger.log(
      .warning, "refused",
      [
        "client": client.peer, "target": target.description, "rule": rule, "code": failure.code.rawValue,
        "reason": failure.reason, "detail": failure.detail ?? "-", "chain": failure.chain ?? "-",
      ])
    close()
  }

  private func close() {
    firstByteTimer?.cancel()
    if case .spliced(let splice) = state { splice.close() } else { client.close() }
  }

  /// The client connection is gone: nothing of this session remains.
  private func ended() {
    loop.preconditionInLoop()
    firstByteTimer?.cancel()
    state = .closed
    context.registry(for: loop).remove(self)
    context.admission.release(client: connection.peer)
  }

  // MARK: Client channel, until the splice takes it over

  func channel(_ channel: any ByteChannel, didRead bytes: [UInt8]) {
    loop.preconditionInLoop()
    noteClientSpoke()
    guard case .connecting(var early, let finished) = state else { return }
    early += bytes
    if early.count > TunnelSession.earlyLimit { client.pauseReading() }
    state = .connecting(early: early, clientFinished: finished)
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    guard case .connecting(let early, _) = state else { return }
    state = .connecting(early: early, clientFinished: true)
  }

  func channelDidDrain(_ channel: any ByteChannel) {}

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    loop.preconditionInLoop()
    ended()
  }

  func noteClientSpoke() {
    loop.preconditionInLoop()
    guard !clientSpoke else { return }
    clientSpoke = true
    firstByteTimer?.cancel()
  }

  // MARK: DrainableSession

  /// A tunnel carries a protocol the proxy cannot see into: it keeps going
  /// until the drain deadline ends the process.
  func drain() {
    loop.preconditionInLoop()
    if !clientSpoke { close() }
  }

  /// Only a tunnel whose client has not spoken yet may be cut under overload.
  var evictionCandidate: EvictionCandidate? {
    loop.preconditionInLoop()
    if clientSpoke { return nil }
    if case .closed = state { return nil }
    return EvictionCandidate(tier: .unfinishedHead, since: accepted)
  }

  func evict() {
    loop.preconditionInLoop()
    close()
  }
}
