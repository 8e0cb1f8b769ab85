import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// One client connection of a tunnel listener: spliced, as raw bytes, to the
/// listener's fixed upstream over TLS under that host's policy. Half-close
/// passes both ways (FIN from the client becomes close_notify and FIN
/// upstream; the upstream's end becomes a FIN to the client).
///
/// Confined to its loop: every entry point runs on `loop.queue`.
final class TunnelSession: ConnectionDelegate, ClientChannelDelegate, UpstreamDelegate, DrainableSession,
  @unchecked Sendable
{
  enum State {
    case connecting
    case splicing(UpstreamConnection)
    case closed
  }

  let connection: Connection
  /// The socket, or TLS over it when the listener has `downstreamTLS: true`.
  var client: any ClientChannel
  let listener: ListenerConfig
  let context: ProxyContext
  let snapshot: RuntimeSnapshot
  let target: HostPort
  var state = State.connecting
  /// Until the client's first byte: a silent client may hold the tunnel (and
  /// its upstream connection) only for `timeouts.clientHeader`, not for
  /// `tunnelIdle`, and is the first to go when connections run out. The
  /// upstream is still dialled at once, as HAProxy and stunnel do, so that
  /// protocols where the server speaks first (SMTP, IMAP) work.
  var firstByteTimer: LoopTimer?
  var clientSpoke = false
  let accepted = DispatchTime.now().uptimeNanoseconds
  var clientDone = false
  var upstreamDone = false
  var idle: IdleWatch?
  /// Client bytes that arrived before the upstream was ready.
  var early: [UInt8] = []

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
    guard var route = UpstreamRoute(host: host, snapshot: snapshot) else {
      return refuse(
        ProxyFailure(
          status: 403, code: .deniedByPolicy,
          reason: "no domain rule matches \(host) and defaults.action is deny"))
    }
    // The operator named this upstream in the listener itself.
    route.namedExplicitly = true
    let seconds = snapshot.timeouts.clientHeader
    firstByteTimer = loop.schedule(after: seconds) { [weak self] in
      guard let self, !self.clientSpoke else { return }
      self.context.logger.log(
        .info, "tunnel-closed",
        ["client": self.connection.peer, "reason": "client sent nothing within \(seconds) s"])
      self.closeAll()
    }
    if listener.downstreamTLS {
      guard let interception = snapshot.interception[listener.name] else {
        return refuse(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "no local CA for downstream TLS"))
      }
      do {
        let engine = try interception.makeEngine(presenting: try interception.ca.leaf(for: host))
        // The client's handshake proceeds while the upstream connects; any
        // plaintext before the splice waits in `early`.
        client = TLSServerChannel.takeOver(
          connection, engine: engine, host: host, target: host.description, logger: context.logger,
          owner: self,
          early: [], timeout: snapshot.timeouts.tlsHandshake)
      } catch {
        return refuse(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "cannot serve TLS for \(host): \(error)"))
      }
    }
    let key = UpstreamKey(host: host, port: target.port, tls: true, policy: route.identity)
    let dialer = context.dialer(for: snapshot)
    dialer.open(key, route: route, on: loop) { [weak self] result in
      guard let self, case .connecting = self.state else {
        if case .success(let upstream) = result { upstream.close() }
        return
      }
      switch result {
      case .failure(let failure): self.refuse(failure, rule: route.ruleName)
      case .success(let upstream): self.splice(upstream)
      }
    }
    idle = IdleWatch(loop: loop, limit: snapshot.timeouts.tunnelIdle) { [weak self] in self?.closeAll() }
  }

  private func splice(_ upstream: UpstreamConnection) {
    upstream.mode = .raw
    upstream.delegate = self
    state = .splicing(upstream)
    if !early.isEmpty {
      upstream.send(early)
      early = []
    }
    if clientDone { upstream.finishSending() }
    client.resumeReading()
  }

  /// Refusals close the client connection; the reason goes to the log.
  private func refuse(_ failure: ProxyFailure, rule: String = "-") {
    context.metrics.increment("pinproxy_refusals_total", [failure.code.rawValue, rule])
    context.logger.log(
      .warning, "refused",
      [
        "client": client.peer, "target": target.description, "rule": rule, "code": failure.code.rawValue,
        "reason": failure.reason, "detail": failure.detail ?? "-", "chain": failure.chain ?? "-",
      ])
    closeAll()
  }

  private func closeAll() {
    idle?.cancel()
    firstByteTimer?.cancel()
    if case .splicing(let upstream) = state { upstream.close() }
    state = .closed
    client.close()
  }

  private func finishIfBothDone() {
    if clientDone && upstreamDone { closeAll() }
  }

  // MARK: Client side

  func connection(_ connection: Connection, didRead bytes: [UInt8]) { clientDidRead(bytes) }
  func connectionDidReadEOF(_ connection: Connection) { clientDidReadEOF() }
  func connectionDidDrain(_ connection: Connection) { clientDidDrain() }
  func connectionDidClose(_ connection: Connection, error: SocketError?) { clientDidClose() }

  func clientDidRead(_ bytes: [UInt8]) {
    idle?.touch()
    if !clientSpoke {
      clientSpoke = true
      firstByteTimer?.cancel()
    }
    switch state {
    case .connecting:
      early += bytes
      if early.count > 256 * 1024 { client.pauseReading() }
    case .splicing(let upstream):
      upstream.send(bytes)
      if upstream.isAboveHighWatermark { client.pauseReading() }
    case .closed: break
    }
  }

  func clientDidReadEOF() {
    clientDone = true
    if case .splicing(let upstream) = state { upstream.finishSending() }
    finishIfBothDone()
  }

  func clientDidDrain() {
    if case .splicing(let upstream) = state { upstream.resumeReading() }
  }

  /// A tunnel carries a protocol the proxy cannot see into: it keeps going
  /// until the drain deadline ends the process.
  func drain() {
    if !clientSpoke { closeAll() }
  }

  /// Only a tunnel whose client has not spoken yet may be cut under overload.
  var evictionCandidate: EvictionCandidate? {
    if clientSpoke { return nil }
    if case .closed = state { return nil }
    return EvictionCandidate(tier: .unfinishedHead, since: accepted)
  }

  func evict() { closeAll() }

  func clientDidClose() {
    context.registry(for: loop).remove(self)
    idle?.cancel()
    firstByteTimer?.cancel()
    if case .splicing(let upstream) = state { upstream.close() }
    state = .closed
    context.admission.release(client: connection.peer)
  }

  // MARK: Upstream side

  func upstream(_ upstream: UpstreamConnection, didReceiveRaw bytes: [UInt8]) {
    idle?.touch()
    client.write(bytes)
    if client.isAboveHighWatermark { upstream.pauseReading() }
  }

  func upstream(_ upstream: UpstreamConnection, didReceive events: [HTTP1Parser.Event]) {}

  func upstreamDidDrain(_ upstream: UpstreamConnection) { client.resumeReading() }

  func upstreamDidFinishSending(_ upstream: UpstreamConnection) {
    upstreamDone = true
    client.shutdownOutput()
    finishIfBothDone()
  }

  func upstreamDidClose(_ upstream: UpstreamConnection, failure: ProxyFailure?) {
    if let failure {
      context.logger.log(.info, "tunnel-closed", ["client": connection.peer, "reason": failure.reason])
    }
    state = .closed
    client.closeAfterFlush()
  }
}
