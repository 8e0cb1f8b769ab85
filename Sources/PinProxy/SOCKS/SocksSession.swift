import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTrust

/// A client of a `mode: socks5` listener until its handshake is done
/// (`SocksHandshake`): method negotiation, RFC 1929 credentials checked
/// against the listener's `proxyAuth` (the same htpasswd file, throttle and
/// cache as HTTP proxy authentication), then the CONNECT request. The
/// tunnel is then handed to a `ForwardSession` as a typed `TunnelRequest`
/// standing for a CONNECT, so routing, interception, passthrough, refusals
/// and the logs are the forward listener's own; only the tunnel's opening
/// and the refusals before it are told in SOCKS replies.
///
/// Fail closed: with `proxyAuth`, only a client whose credential was
/// verified gets past the greeting; the request handed on carries the
/// verified credential, which the forward machine adopts only while the
/// file in force still has it (`ProxyAuthGate.adopt`).
/// The handshake must finish within `timeouts.clientHeader`, and until it
/// has the session is in its loop's registry as a connection waiting on
/// its client: at a connection limit it is evicted like a half-sent HTTP
/// head (`EvictionCandidate.Tier.unfinishedHead`), so a flood of half
/// greetings cannot hold every slot. Confined to the connection's loop.
final class SocksSession: ChannelDelegate, DrainableSession, @unchecked Sendable {
  /// Its place in the loop's `SessionRegistry`.
  var registrySlot = RegistrySlot()
  let connection: Connection
  let context: ProxyContext
  let bound: BoundListener
  var listener: ListenerConfig { bound.config }
  let admission: AdmissionTicket
  let origin: ClientOrigin
  let snapshot: RuntimeSnapshot
  private var handshake: SocksHandshake
  /// The credential the handshake verified: the tunnel's from then on.
  private var verified: VerifiedCredential?
  private var timer: LoopTimer?
  private var finished = false
  /// When the client connected (uptime nanoseconds): the oldest waiting
  /// handshake is evicted first.
  private let accepted = DispatchTime.now().uptimeNanoseconds

  init(
    connection: Connection, context: ProxyContext, listener: BoundListener, admission: AdmissionTicket,
    origin: ClientOrigin
  ) {
    self.connection = connection
    self.context = context
    bound = listener
    self.admission = admission
    self.origin = origin
    snapshot = context.snapshot
    handshake = SocksHandshake(requiresPassword: listener.access(under: snapshot).authenticator != nil)
    connection.delegate = self
  }

  func start() {
    connection.loop.preconditionInLoop()
    context.registry(for: connection.loop).add(self)
    let seconds = snapshot.timeouts.clientHeader
    timer = connection.loop.schedule(after: seconds) { [weak self] in
      self?.fail(reply: nil, reason: "the SOCKS handshake took longer than \(seconds) s")
    }
    connection.resumeReading()
  }

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    act(handshake.feed(bytes))
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    fail(reply: nil, reason: "the client closed during the SOCKS handshake")
  }

  func channelDidDrain(_ channel: any ByteChannel) {}

  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    end()
  }

  /// The handshake is over, whichever way: the session leaves the registry
  /// (a `ForwardSession` registers itself for a handed-over tunnel).
  private func end() {
    timer?.cancel()
    finished = true
    context.registry(for: connection.loop).remove(self)
  }

  deinit { context.registry(for: connection.loop).forget(self) }

  // MARK: DrainableSession

  /// Nothing is owed to a client still in its handshake: close now.
  func drain() {
    connection.loop.preconditionInLoop()
    guard !finished else { return }
    end()
    connection.close()
  }

  /// A handshake in progress waits on its client, as a half-sent head does.
  var evictionCandidate: EvictionCandidate? {
    connection.loop.preconditionInLoop()
    guard !finished, handshake.isUnfinished else { return nil }
    return EvictionCandidate(tier: .unfinishedHead, since: accepted)
  }

  func evict() {
    connection.loop.preconditionInLoop()
    context.logger.log(.debug, "evicted", ["client": origin.peer, "reason": "connection limit reached"])
    drain()
  }

  var clientPeer: String { origin.peer }
  var clientKey: String { origin.key }

  /// The CONNECT is judged under the snapshot in force when it is handed on.
  func reviewAccess(under snapshot: RuntimeSnapshot) {}

  private func act(_ step: SocksHandshake.Step) {
    connection.loop.preconditionInLoop()
    guard !finished else { return }
    switch step {
    case .more: return
    case .reply(let bytes):
      connection.write(bytes)
      act(handshake.step())
    case .check(let credentials):
      check(credentials)
    case .connect(let host, let port, let early):
      handOver(host: host, port: port, early: early)
    case .fail(let reply, let reason):
      fail(reply: reply, reason: reason)
    }
  }

  /// RFC 1929 credentials, through the listener's authenticator (the
  /// same file, cache and throttle as `Proxy-Authorization: Basic`).
  private func check(_ credentials: BasicCredentials) {
    guard let authenticator = bound.access(under: snapshot).authenticator else {
      return act(handshake.credentialChecked(false, reason: "this listener takes no credentials"))
    }
    let decision = authenticator.check(credentials, client: origin.key)
    guard case .verify(let pending) = decision else { return concluded(decision) }
    let loop = connection.loop
    authenticator.verify(pending) { [self] decision in
      loop.execute { self.concluded(decision) }
    }
  }

  /// The credential's verdict: the handshake goes on, or is refused.
  private func concluded(_ decision: ProxyAuthenticator.Decision) {
    switch decision {
    case .allowed(let credential):
      verified = credential
      act(handshake.credentialChecked(true, reason: ""))
    case .refused(let refusal):
      act(handshake.credentialChecked(false, reason: refusal.reason))
    case .verify:
      act(handshake.credentialChecked(false, reason: "the credential check did not conclude"))
    }
  }

  /// The handshake is done: the tunnel is the CONNECT a forward listener
  /// would have received, asked for as a typed request with the verified
  /// credential, and what the client sent after its request follows it.
  private func handOver(host: TrustHost, port: Int, early: [UInt8]) {
    end()
    let session = ForwardSession(
      connection: connection, context: context, listener: bound, admission: admission, origin: origin)
    session.start(
      tunnel: TunnelRequest(host: host, port: port, credential: verified, early: early),
      replies: TunnelReplies(
        opened: SocksHandshake.reply(.succeeded),
        refused: { SocksHandshake.reply(SocksHandshake.ReplyCode($0)) }))
  }

  private func fail(reply: [UInt8]?, reason: String) {
    guard !finished else { return }
    end()
    var fields = ["listener": listener.name, "client": origin.peer, "reason": reason]
    origin.addFields(to: &fields)
    context.logger.log(.info, "socks-refused", fields: fields)
    context.metrics.listenerRefused(listener.name)
    if let reply { connection.write(reply) }
    connection.closeAfterFlush()
  }
}
