import Foundation
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
final class TunnelSession: ConnectionDelegate, UpstreamDelegate, @unchecked Sendable {
  enum State {
    case connecting
    case splicing(UpstreamConnection)
    case closed
  }

  let connection: Connection
  let context: ProxyContext
  let snapshot: RuntimeSnapshot
  let target: HostPort
  var state = State.connecting
  var clientDone = false
  var upstreamDone = false
  var lastActivity = Date()
  var idleTimer: LoopTimer?
  /// Client bytes that arrived before the upstream was ready.
  var early: [UInt8] = []

  var loop: EventLoop { connection.loop }

  init(connection: Connection, context: ProxyContext, target: HostPort) {
    self.connection = connection
    self.context = context
    self.target = target
    snapshot = context.snapshot
    connection.delegate = self
  }

  func start() {
    loop.preconditionInLoop()
    guard let host = TrustHost(target.host) else {
      return refuse(.badRequest("\(target.host) is not a valid host"))
    }
    guard let route = UpstreamRoute(host: host, snapshot: snapshot) else {
      return refuse(
        ProxyFailure(
          status: 403, code: .deniedByPolicy,
          reason: "no domain rule matches \(host) and defaults.action is deny"))
    }
    let key = UpstreamKey(host: host, port: target.port, tls: true, policy: route.identity)
    let dialer = UpstreamDialer(
      snapshot: snapshot, trustEngine: context.trustEngine, sessions: context.sessions)
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
    armIdleTimer(after: snapshot.timeouts.tunnelIdle)
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
    connection.resumeReading()
  }

  /// Refusals close the client connection; the reason goes to the log.
  private func refuse(_ failure: ProxyFailure, rule: String = "-") {
    context.logger.log(
      .warning, "refused",
      [
        "client": connection.peer, "target": target.description, "rule": rule, "code": failure.code.rawValue,
        "reason": failure.reason, "chain": failure.chain ?? "-",
      ])
    closeAll()
  }

  private func armIdleTimer(after seconds: Double) {
    idleTimer = loop.schedule(after: seconds) { [weak self] in
      guard let self else { return }
      let idle = Date().timeIntervalSince(self.lastActivity)
      let limit = self.snapshot.timeouts.tunnelIdle
      if idle >= limit { return self.closeAll() }
      self.armIdleTimer(after: limit - idle)
    }
  }

  private func closeAll() {
    idleTimer?.cancel()
    if case .splicing(let upstream) = state { upstream.close() }
    state = .closed
    connection.close()
  }

  private func finishIfBothDone() {
    if clientDone && upstreamDone { closeAll() }
  }

  // MARK: Client side

  func connection(_ connection: Connection, didRead bytes: [UInt8]) {
    lastActivity = Date()
    switch state {
    case .connecting:
      early += bytes
      if early.count > 256 * 1024 { connection.pauseReading() }
    case .splicing(let upstream):
      upstream.send(bytes)
      if upstream.isAboveHighWatermark { connection.pauseReading() }
    case .closed: break
    }
  }

  func connectionDidReadEOF(_ connection: Connection) {
    clientDone = true
    if case .splicing(let upstream) = state { upstream.finishSending() }
    finishIfBothDone()
  }

  func connectionDidDrain(_ connection: Connection) {
    if case .splicing(let upstream) = state { upstream.resumeReading() }
  }

  func connectionDidClose(_ connection: Connection, error: SocketError?) {
    idleTimer?.cancel()
    if case .splicing(let upstream) = state { upstream.close() }
    state = .closed
    context.openConnections.subtract(1, ordering: .relaxed)
  }

  // MARK: Upstream side

  func upstream(_ upstream: UpstreamConnection, didReceiveRaw bytes: [UInt8]) {
    lastActivity = Date()
    connection.write(bytes)
    if connection.isAboveHighWatermark { upstream.pauseReading() }
  }

  func upstream(_ upstream: UpstreamConnection, didReceive events: [HTTP1Parser.Event]) {}

  func upstreamDidDrain(_ upstream: UpstreamConnection) { connection.resumeReading() }

  func upstreamDidFinishSending(_ upstream: UpstreamConnection) {
    upstreamDone = true
    connection.shutdownOutput()
    finishIfBothDone()
  }

  func upstreamDidClose(_ upstream: UpstreamConnection, failure: ProxyFailure?) {
    if let failure {
      context.logger.log(.info, "tunnel-closed", ["client": connection.peer, "reason": failure.reason])
    }
    state = .closed
    connection.closeAfterFlush()
  }
}
