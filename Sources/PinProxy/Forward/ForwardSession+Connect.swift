import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// CONNECT: refused (port not allowed, host denied), spliced raw (passthrough
/// hosts, or a listener with `intercept: false`), or intercepted — answered
/// with TLS under a leaf minted for the host, the requests inside served
/// through the same upstream path as forward mode.
extension ForwardSession {
  func beginConnect(_ head: HTTPRequestHead, host rawHost: String, port: Int) {
    guard let host = TrustHost(rawHost) else {
      return fail(.badRequest("\"\(rawHost)\" is not a valid host"), head)
    }
    if let refusal = portRefusal(port) { return fail(refusal, head) }
    let listedPassthrough = snapshot.passthrough[listener.name]?.contains(host) ?? false
    let route = UpstreamRoute(host: host, snapshot: snapshot)
    guard listedPassthrough || route != nil else {
      return fail(
        ProxyFailure(
          status: 403, code: .deniedByPolicy,
          reason: "no domain rule matches \(host) and defaults.action is deny"),
        head)
    }
    if listedPassthrough || !listener.intercept {
      let named =
        (snapshot.passthrough[listener.name]?.names(host) ?? false) || route?.namedExplicitly == true
      return beginPassthrough(head, host: host, port: port, namedExplicitly: named)
    }
    guard let route, let interception = snapshot.interception[listener.name] else {
      return fail(
        ProxyFailure(
          status: 502, code: .handshakeFailed, reason: "this listener has no local CA to intercept with"),
        head)
    }
    intercept(head, host: host, port: port, route: route, interception: interception)
  }

  private func intercept(
    _ head: HTTPRequestHead, host: TrustHost, port: Int, route: UpstreamRoute,
    interception: InterceptionContext
  ) {
    let engine: TLSEngine
    do {
      let started = Date()
      let (leaf, minted) = try interception.ca.leafReportingMint(for: host)
      if minted {
        context.metrics.mintedCertificates.add(1)
        let milliseconds = String(format: "%.3f", Date().timeIntervalSince(started) * 1000)
        context.logger.log(.info, "minted", ["host": host.description, "ms": milliseconds])
      }
      engine = try interception.makeEngine(presenting: leaf)
    } catch {
      return fail(
        ProxyFailure(status: 502, code: .handshakeFailed, reason: "cannot serve TLS for \(host): \(error)"),
        head)
    }
    connection.write(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8))
    let early = parser.takeLeftover()
    parser = HTTP1Parser(role: .request, limits: snapshot.httpLimits, pausesBetweenMessages: true)
    pending = []
    connectTarget = (host, port)
    state = .awaitingRequest
    armHeadTimer(idle: false)
    client = TLSServerChannel.takeOver(
      connection, engine: engine, host: host, target: "\(host):\(port)", logger: context.logger, owner: self,
      early: early, timeout: snapshot.timeouts.tlsHandshake)
  }

  /// One port policy for every way of reaching an upstream: the listener's
  /// `allowedConnectPorts` governs CONNECT and absolute-form URLs alike, on
  /// the port the client named (a `connectTo` mapping does not change it).
  func portRefusal(_ port: Int) -> ProxyFailure? {
    guard !listener.allowedConnectPorts.contains(port) else { return nil }
    return ProxyFailure(
      status: 403, code: .deniedByPolicy,
      reason: "port \(port) is not allowed (allowedConnectPorts: \(listener.allowedConnectPorts))")
  }

  private func beginPassthrough(_ head: HTTPRequestHead, host: TrustHost, port: Int, namedExplicitly: Bool) {
    context.logger.log(
      .info, "passthrough",
      ["client": client.peer, "target": "\(host):\(port)", "pinning": "none (spliced, not intercepted)"])
    let key = UpstreamKey(
      host: host, port: port, tls: false, policy: PolicyIdentity(generation: snapshot.generation, rule: -2))
    let dialer = context.dialer(for: snapshot)
    let placeholder = Exchange(
      request: head, key: key, route: UpstreamRoute.plain(host, namedExplicitly: namedExplicitly), path: "",
      client: client.peer)
    state = .connecting(placeholder)
    dialer.open(key, route: placeholder.route, on: loop) { [weak self] result in
      guard let self, case .connecting(let current) = self.state, current === placeholder else {
        if case .success(let upstream) = result { upstream.close() }
        return
      }
      switch result {
      case .failure(let failure): self.fail(failure, head, exchange: placeholder)
      case .success(let upstream):
        upstream.mode = .raw
        upstream.delegate = self
        let idle = IdleWatch(loop: self.loop, limit: self.snapshot.timeouts.tunnelIdle) { [weak self] in
          self?.closeNow()
        }
        self.state = .splicing(upstream, idle)
        self.client.write(Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8))
        let early = self.parser.takeLeftover()
        if !early.isEmpty { upstream.send(early) }
        self.client.resumeReading()
      }
    }
  }

  func finishSpliceIfDone() {
    guard clientSplicedDone && upstreamSplicedDone else { return }
    closeNow()
  }
}
