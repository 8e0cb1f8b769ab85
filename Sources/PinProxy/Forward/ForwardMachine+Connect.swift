import PinHTTP

/// The CONNECT half of the forward machine: a passthrough tunnel spliced,
/// an intercepted one parsed afresh inside TLS (or plain HTTP).
extension ForwardMachine {
  /// A tunnel asked for without an HTTP head (a SOCKS5 CONNECT, decoded by
  /// `SocksHandshake`): refused, spliced or intercepted as the CONNECT it
  /// stands for, under this connection's router, and logged as one. The
  /// machine has read nothing yet; the client stays paused until the
  /// tunnel opens. Fail closed: with `proxyAuth`, only the credential the
  /// handshake verified opens it, and only while the file in force still
  /// has that user with that hash (`ProxyAuthGate.adopt`).
  mutating func openTunnel(_ request: TunnelRequest) {
    let head = request.head
    if let refusal = router.refusal { return fail(refusal, request: head) }
    if let authenticator = router.authenticator,
      let failure = authGate.adopt(request.credential, under: authenticator)
    {
      return fail(failure, request: head)
    }
    earlyTunnelBytes = request.early
    follow(router.routeConnect(to: request.host, port: request.port), for: head)
  }

  /// The passthrough upstream is connected: the client gets its 200 and the
  /// splice starts with whatever the client sent after the CONNECT head.
  mutating func passthroughReady() -> (early: [UInt8], clientFinished: Bool)? {
    guard case .openingTunnel = state else { return nil }
    state = .spliced
    clearHeadDeadline()
    return (takeTunnelBytes(), clientFinishedSending)
  }

  /// What the client sent after asking for the tunnel: after a CONNECT
  /// head the parser holds it; a SOCKS5 client's came with its request.
  private mutating func takeTunnelBytes() -> [UInt8] {
    let leftover = parser.takeLeftover()
    guard !earlyTunnelBytes.isEmpty else { return leftover }
    defer { earlyTunnelBytes = [] }
    return earlyTunnelBytes + leftover
  }

  /// Interception can start: requests inside the tunnel are parsed afresh.
  /// Returns the bytes the client sent after the CONNECT head (the start of
  /// its TLS handshake).
  mutating func interceptionReady(_ target: ConnectTarget) -> [UInt8]? {
    guard case .openingTunnel = state else { return nil }
    let early = takeTunnelBytes()
    parser = HTTP1Parser(role: .request, limits: limits, pausesBetweenMessages: true)
    pending.removeAll()
    tunnel = target
    state = .awaitingRequest
    awaitRestOfHead()
    actions.append(.resumeClient(unlessBackedUp: nil))
    return early
  }

  /// The client's first bytes in an intercepted tunnel were not a TLS
  /// handshake: its requests are plain HTTP for the CONNECT host.
  mutating func tunnelIsPlain() {
    tunnel?.plain = true
  }

  mutating func interceptionFailed(_ failure: ProxyFailure) {
    guard case .openingTunnel(let head, _) = state else { return }
    fail(failure, request: head)
  }
}
