import PinEventLoop
import PinTLS
import PinTrust

extension TLSChannel {
  /// Terminates a client's TLS on `connection` with a leaf minted for
  /// `host` (an intercepted CONNECT, a tunnel listener with
  /// `downstreamTLS`): the channel reports to `owner`, and a refused
  /// handshake is logged as such.
  ///
  /// A client whose SNI names another host is refused before the server's
  /// flight (and the minted leaf) is sent: serving the leaf under another
  /// name would let one CONNECT reach a second host's policy.
  static func serve(
    _ connection: Connection, engine: TLSEngine, host: TrustHost, target: String, logger: ProxyLogger,
    owner: any ChannelDelegate, early: [UInt8], timeout: Double,
    established: ((TLSChannel) -> Void)? = nil
  ) -> TLSChannel {
    let checks = Checks(beforeFlight: { engine in
      guard let name = engine.requestedServerName, TrustHost(name) != host else { return nil }
      return ProxyFailure(
        status: 502, code: .handshakeFailed,
        reason: "client asked for \(name) (SNI) inside a CONNECT to \(host)")
    })
    let channel = TLSChannel(connection: connection, engine: engine, checks: checks)
    channel.delegate = owner
    let peer = connection.peer
    channel.start(early: early, timeout: timeout) { [unowned channel] result in
      // Before any application data is read: the owner may pick the
      // protocol ALPN settled on.
      guard case .failure(let failure) = result else { return established?(channel) ?? () }
      let reason: String
      switch failure {
      case .tls(let error): reason = "client TLS handshake failed: \(error.description)"
      case .timedOut(let seconds): reason = "client TLS handshake took longer than \(seconds) s"
      case .refused(let refusal): reason = refusal.reason
      // The client went away; nothing was refused.
      case .closedByPeer, .closed: return
      }
      logger.log(
        .warning, "refused", ["client": peer, "target": target, "code": "handshake-failed", "reason": reason])
    }
    return channel
  }
}
