import Dispatch
import PinConfig
import PinEventLoop
import PinTLS
import PinTrust

/// One client connection of a tunnel listener: spliced (`Splice`), as raw
/// bytes, to the listener's fixed upstream over TLS under that host's
/// policy. The I/O around a `TunnelMachine`, which decides what happens
/// until the splice takes both channels over.
///
/// Confined to its loop (`loop.queue`): every entry point is a channel
/// delegate call, a timer or the dial completion on that queue.
final class TunnelSession: ChannelDelegate, DrainableSession, @unchecked Sendable {
  /// Its place in the loop's `SessionRegistry`.
  var registrySlot = RegistrySlot()
  let connection: Connection
  /// The socket, or TLS over it when the listener has `downstreamTLS: true`.
  var client: any ByteChannel
  let listener: ListenerConfig
  let context: ProxyContext
  let snapshot: RuntimeSnapshot
  let target: HostPort
  var machine = TunnelMachine()
  var splice: Splice?
  /// Until the client's first byte: a silent client may hold the tunnel (and
  /// its upstream connection) only for `timeouts.clientHeader`, not for
  /// `tunnelIdle`, and is the first to go when connections run out. The
  /// upstream is still dialled at once, as HAProxy and stunnel do, so that
  /// protocols where the server speaks first (SMTP, IMAP) work.
  var firstByteTimer: LoopTimer?
  let accepted = DispatchTime.now().uptimeNanoseconds

  var loop: EventLoop { connection.loop }
  var clientPeer: String { connection.peer }
  /// Who the client is: its address, its admission key and, on this host,
  /// its socket's owner.
  let origin: ClientOrigin
  var clientKey: String { origin.key }

  init(
    connection: Connection, context: ProxyContext, listener: ListenerConfig, target: HostPort,
    origin: ClientOrigin
  ) {
    self.connection = connection
    self.origin = origin
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
      guard let self, let action = self.machine.clientSilent() else { return }
      self.context.logger.log(
        .info, "tunnel-closed",
        ["client": self.connection.peer, "reason": "client sent nothing within \(seconds) s"])
      self.execute(action)
    }
    if listener.downstreamTLS {
      guard let interception = snapshot.interception[listener.name] else {
        return refuse(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "no local CA for downstream TLS"))
      }
      do {
        let engine = try interception.makeEngine(presenting: try interception.ca.leaves(for: host))
        // The client's handshake proceeds while the upstream connects.
        // A listener that requires client certificates dials only once the
        // client's certificate was verified: a client that is refused
        // costs no upstream connection and never reaches the upstream.
        let verifiesClients = interception.clientCertificates != nil
        client = TLSChannel.serve(
          connection, origin: origin, engine: engine, host: host, target: host.description,
          logger: context.logger,
          metrics: context.metrics, listener: listener, owner: self,
          early: [], timeout: snapshot.timeouts.tlsHandshake, localCA: snapshot.localCACertificate,
          established: verifiesClients ? { [weak self] _ in self?.dial(host: host, route: route) } : nil)
        if verifiesClients { return }
      } catch {
        return refuse(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "cannot serve TLS for \(host): \(error)"))
      }
    } else {
      connection.resumeReading()
    }
    dial(host: host, route: route)
  }

  /// Connects to the listener's upstream under its rule.
  private func dial(host: TrustHost, route: UpstreamRoute) {
    loop.preconditionInLoop()
    let key = UpstreamKey(host: host, port: target.port, tls: true, policy: route.identity)
    context.dialer(for: snapshot).open(key, route: route, on: loop) { [weak self] result in
      guard let self else {
        if case .success(let upstream) = result { upstream.close() }
        return
      }
      switch result {
      case .failure(let failure):
        if case .connecting = self.machine.state { self.refuse(failure, rule: route.ruleName) }
      case .success(let upstream):
        self.execute(self.machine.upstreamReady(), upstream: upstream, key: key)
      }
    }
  }

  private func execute(
    _ action: TunnelMachine.Action, upstream: DialedUpstream? = nil, key: UpstreamKey? = nil
  ) {
    loop.preconditionInLoop()
    switch action {
    case .pauseClient:
      client.pauseReading()
    case .discardUpstream:
      upstream?.close()
    case .close:
      firstByteTimer?.cancel()
      if let splice { splice.close() } else { client.close() }
    case .splice(let early, let clientFinished):
      guard let upstream, let key else { return }
      let splice = Splice(
        client: client, upstream: upstream, idleLimit: snapshot.timeouts.tunnelIdle, early: early,
        clientFinished: clientFinished
      ) { [self] upstreamError in
        if let upstreamError {
          let reason = UpstreamConnection.failure(upstreamError, key: key).reason
          context.logger.log(.info, "tunnel-closed", ["client": connection.peer, "reason": reason])
        }
        ended()
      }
      if !machine.clientSpoke { splice.onFirstClientBytes = { [weak self] in self?.clientSpoke() } }
      self.splice = splice
    }
  }

  /// Refusals close the client connection; the reason goes to the log.
  private func refuse(_ failure: ProxyFailure, rule: String = "-") {
    Refusal(failure, rule: rule, site: target.description).report(
      to: context.logger, context.metrics, client: origin, answering: nil, loop: loop.index,
      level: .warning)
    context.metrics.listenerRefused(listener.name)
    close()
  }

  private func close() { execute(machine.close()) }

  /// Out of the registry at the latest now (its entries are unretained).
  deinit { context.registry(for: loop).forget(self) }

  /// The client connection is gone: nothing of this session remains.
  private func ended() {
    loop.preconditionInLoop()
    firstByteTimer?.cancel()
    machine.clientClosed()
    splice = nil
    context.registry(for: loop).remove(self)
  }

  // MARK: Client channel, until the splice takes it over

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    loop.preconditionInLoop()
    firstByteTimer?.cancel()
    if let action = machine.clientRead(bytes) { execute(action) }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    loop.preconditionInLoop()
    machine.clientEOF()
  }

  func channelDidDrain(_ channel: any ByteChannel) {}

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    loop.preconditionInLoop()
    ended()
  }

  /// The client's first bytes arrived inside the splice: it is no longer silent.
  private func clientSpoke() {
    loop.preconditionInLoop()
    firstByteTimer?.cancel()
    _ = machine.clientRead([])
  }

  // MARK: DrainableSession

  /// A tunnel carries a protocol the proxy cannot see into: it keeps going
  /// until the drain deadline ends the process.
  func drain() {
    loop.preconditionInLoop()
    if let action = machine.drain() { execute(action) }
  }

  var evictionCandidate: EvictionCandidate? {
    loop.preconditionInLoop()
    return machine.isEvictable ? EvictionCandidate(tier: .unfinishedHead, since: accepted) : nil
  }

  func evict() {
    loop.preconditionInLoop()
    close()
  }

  /// A tunnel listener's connection decides nothing after it is spliced:
  /// it closes when a reload took its client's access away.
  func reviewAccess(under snapshot: RuntimeSnapshot) {
    loop.preconditionInLoop()
    guard let reason = snapshot.accessRevoked(listener: listener, client: origin, credential: nil)
    else {
      return
    }
    context.logger.log(.info, "tunnel-closed", ["client": connection.peer, "reason": reason])
    close()
  }
}
