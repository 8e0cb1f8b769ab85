import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// An intercepted tunnel whose client has not spoken yet.
struct PendingTunnel {
  let engine: TLSEngine
  let target: ConnectTarget
}

/// The I/O of a CONNECT the router accepted: a passthrough host is dialled
/// and spliced raw; an intercepted one gets TLS under a leaf minted for the
/// host, and the requests inside are served by the same machine.
/// The answers to a tunnel asked for in another protocol than HTTP: its
/// opening, and a refusal before it (for SOCKS5, RFC 1928 §6 replies).
struct TunnelReplies {
  let opened: [UInt8]
  let refused: (ProxyFailure) -> [UInt8]
}

extension ForwardSession {
  /// The reply that opens a tunnel, whichever kind (RFC 9110 §9.3.6: any 2xx).
  static let connectEstablished = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)

  /// The tunnel is open: a CONNECT's 200, or a SOCKS client's success reply.
  func answerTunnelOpened() {
    tunnelAnswered = true
    writeToClient(tunnelReplies?.opened ?? ForwardSession.connectEstablished)
  }

  func openPassthrough(_ target: ForwardTarget) {
    // The router lets a pinned rule's host through only where a passthrough
    // entry names it: its pins are waived, loudly.
    let governing = target.route.governing
    let waived = governing?.pins == true
    context.logger.log(
      waived ? .warning : .info, "passthrough",
      [
        "client": client.peer, "target": target.key.description, "rule": governing?.name ?? "none",
        "pinning": waived
          ? "waived: the rule's pins are not checked (listed under passthrough)"
          : "none (spliced, not intercepted)",
      ])
    context.metrics.passthroughTunnels.increment([listener.name, governing?.name ?? "none"])
    // Held until the dial answers, on this loop (see `acquireUpstream`).
    context.dialer(for: snapshot).open(target.key, route: target.route, on: loop) { [self] result in
      switch result {
      case .failure(let failure):
        self.run { $0.dialFailed(failure, exchange: nil) }
      case .success(let upstream):
        var opened: (early: [UInt8], clientFinished: Bool)?
        self.run { opened = $0.passthroughReady() }
        guard let opened else { return upstream.close() }
        self.answerTunnelOpened()
        self.mode = .spliced(
          Splice(
            client: self.client, upstream: upstream, idleLimit: self.snapshot.timeouts.tunnelIdle,
            early: opened.early, clientFinished: opened.clientFinished, gate: self.sniGate(for: target)
          ) { [self] _ in self.ended() })
      }
    }
  }

  /// The splice relays nothing of the client's until its ClientHello names
  /// the CONNECT host (`ForwardRouter.spliceRefusal`), within
  /// `timeouts.tlsHandshake`; a refused one is logged as `refused`
  /// (denied-by-policy) and counted like any refusal.
  func sniGate(for target: ForwardTarget) -> Splice.Gate {
    let router = machine.router
    let host = target.key.host
    let connect = ConnectTarget(host: host, port: target.key.port)
    return Splice.Gate(
      deadline: snapshot.timeouts.tlsHandshake,
      refusal: { router.spliceRefusal($0, connectHost: host) },
      refused: { [weak self] reason in
        guard let self else { return }
        Refusal(ProxyFailure(status: 403, code: .deniedByPolicy, reason: reason), tunnel: connect)
          .log(to: self.context.logger, self.context.metrics, client: self.origin, level: .warning)
      })
  }

  func intercept(_ target: ConnectTarget, _ interception: InterceptionContext) {
    let engine: TLSEngine
    do {
      let started = Date()
      let (leaves, minted) = try interception.ca.leafReportingMint(for: target.host)
      if minted {
        context.metrics.mintedCertificates.add(1)
        let milliseconds = String(format: "%.3f", Date().timeIntervalSince(started) * 1000)
        context.logger.log(.info, "minted", ["host": target.host.description, "ms": milliseconds])
      }
      engine = try interception.makeEngine(presenting: leaves)
    } catch {
      let failure = ProxyFailure(
        status: 502, code: .handshakeFailed, reason: "cannot serve TLS for \(target.host): \(error)")
      return run { $0.interceptionFailed(failure) }
    }
    var early: [UInt8]?
    run { early = $0.interceptionReady(target) }
    guard let early else { return }
    answerTunnelOpened()
    let pending = PendingTunnel(engine: engine, target: target)
    if early.isEmpty {
      mode = .awaitingTunnelBytes(pending)
    } else {
      early.withUnsafeBytes { startTunnel(pending, first: $0) }
    }
  }

  /// Decides what the client speaks in the tunnel from its first byte: 0x16
  /// opens a TLS handshake record (RFC 8446 §5.1, and every TLS before it);
  /// anything else is taken as plain HTTP, which the parser then judges.
  func startTunnel(_ pending: PendingTunnel, first bytes: UnsafeRawBufferPointer) {
    if bytes.first == 0x16 {
      let target = pending.target
      clientTLS = TLSChannel.serve(
        connection, origin: origin, engine: pending.engine, host: target.host,
        target: "\(target.host):\(target.port)",
        logger: context.logger, metrics: context.metrics, listener: listener, owner: self,
        early: Array(bytes),
        timeout: snapshot.timeouts.tlsHandshake, localCA: snapshot.localCACertificate
      ) { [self] channel in
        // Held by the channel until its handshake ends, then let go.
        guard channel.negotiatedProtocol == .http2 else { return }
        startHTTP2(on: channel, tunnel: target)
      }
    } else {
      run {
        $0.tunnelIsPlain()
        $0.clientRead(bytes)
      }
    }
  }
}

extension ForwardSession {
  /// The intercepted client chose `h2`: a `DownstreamHTTP2Session` becomes
  /// the channel's delegate and takes this session's registry entry and
  /// admission slot; this session, its machine idle and its timers
  /// cancelled, is done.
  func startHTTP2(on channel: TLSChannel, tunnel: ConnectTarget) {
    loop.preconditionInLoop()
    stopTimers()
    mode = .ended
    registry.remove(self)
    let http2: DownstreamHTTP2Session
    do {
      http2 = try DownstreamHTTP2Session(
        client: channel, context: context, snapshot: snapshot, listener: listener, tunnel: tunnel,
        pool: pool, admission: admission, origin: origin, credential: machine.credential)
    } catch {
      Refusal(
        ProxyFailure(status: 502, code: .handshakeFailed, reason: "HTTP/2 setup failed: \(error)"),
        tunnel: tunnel
      )
      .log(to: context.logger, context.metrics, client: origin, level: .warning)
      admission.release()
      return channel.close()
    }
    http2.start()
  }
}
