import PinHTTP

/// The CONNECT half of the forward machine: a passthrough tunnel spliced,
/// an intercepted one parsed afresh inside TLS (or plain HTTP).
extension ForwardMachine {
  /// The passthrough upstream is connected: the client gets its 200 and the
  /// splice starts with whatever the client sent after the CONNECT head.
  mutating func passthroughReady() -> (early: [UInt8], clientFinished: Bool)? {
    guard case .openingTunnel = state else { return nil }
    state = .spliced
    return (parser.takeLeftover(), clientFinishedSending)
  }

  /// Interception can start: requests inside the tunnel are parsed afresh.
  /// Returns the bytes the client sent after the CONNECT head (the start of
  /// its TLS handshake).
  mutating func interceptionReady(_ target: ConnectTarget) -> [UInt8]? {
    guard case .openingTunnel = state else { return nil }
    let early = parser.takeLeftover()
    parser = HTTP1Parser(role: .request, limits: limits, pausesBetweenMessages: true)
    pending.removeAll()
    tunnel = target
    state = .awaitingRequest
    armHeaderTimer()
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
