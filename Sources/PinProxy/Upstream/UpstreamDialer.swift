import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// Opens a new upstream channel: connectTo mapping, name resolution off the
/// loop, a bounded non-blocking connect, then (for a TLS key) the handshake
/// and the trust decision (`UpstreamTrust`). What it hands out is a byte
/// channel, already trusted, with what the dial learnt about it
/// (`DialedUpstream`): the forward path puts the HTTP codec of the
/// negotiated protocol on it (`UpstreamConnection`,
/// `HTTP2UpstreamConnection`), a splice relays it raw. Failures come back
/// as 502 or 504 with their code.
///
/// An object: a loop's sessions share one per snapshot
/// (`UpstreamPool.dialer(under:make:)`), each holding it with one reference.
final class UpstreamDialer: Sendable {
  let snapshot: RuntimeSnapshot
  let trustEngine: TrustEngine
  let sessions: TLSSessionCache
  let metrics: ProxyMetrics
  /// Told about refused chains and waived pin failures; nil for the
  /// reporter's own posts (a report never causes a report).
  let reporter: (any PinFailureReporting)?
  /// Fetches the revocation information a rule looks for; nil decides with
  /// what is at hand (`pinproxy pins update`).
  let revocationFetcher: (any RevocationFetching)?

  init(
    snapshot: RuntimeSnapshot, trustEngine: TrustEngine, sessions: TLSSessionCache, metrics: ProxyMetrics,
    reporter: (any PinFailureReporting)?, revocationFetcher: (any RevocationFetching)? = nil
  ) {
    (self.snapshot, self.trustEngine, self.sessions, self.metrics) = (
      snapshot, trustEngine, sessions, metrics
    )
    (self.reporter, self.revocationFetcher) = (reporter, revocationFetcher)
  }

  /// - Parameter http2: offer `h2` in ALPN (the forward path, for a rule
  ///   with `upstreamHTTP2`); what the origin chose is `negotiated`.
  ///
  /// One pipeline for every way out: the first hop (the host, at its
  /// `connectTo` address when one is mapped, or the route's parent proxy)
  /// is resolved off the loop, judged by the dial's one `DialGuard`,
  /// connected within `timeouts.upstreamConnect` (through a parent, the
  /// tunnel is asked for within what is left of it), then the handshake
  /// and the trust decision.
  func open(
    _ key: UpstreamKey, route: UpstreamRoute, on loop: EventLoop, http2: Bool = false,
    _ completion: @escaping (Result<DialedUpstream, ProxyFailure>) -> Void
  ) {
    loop.preconditionInLoop()
    let (target, mapped) = snapshot.connectAddress(host: key.host, port: key.port)
    // A dial that succeeded is timed from here to a usable connection
    // (resolution, connect, handshake, trust decision), by handshake kind.
    let (started, metrics) = (DispatchTime.now().uptimeNanoseconds, self.metrics)
    nonisolated(unsafe) let original = completion
    nonisolated(unsafe) let completion = { (result: Result<DialedUpstream, ProxyFailure>) in
      if case .success(let dialed) = result {
        metrics.upstreamConnectDuration.observe(
          UpstreamTLS.allCases.firstIndex(of: dialed.tls) ?? 0,
          nanoseconds: DispatchTime.nanoseconds(since: started),
          loop: loop.index)
      }
      original(result)
    }
    // `connectTo` maps direct dials only: a parent is asked for the name.
    let hop = route.parent.map(Hop.parent) ?? Hop.direct(target)
    let dialGuard = DialGuard(
      key: key, route: route, mapped: mapped && route.parent == nil, addresses: snapshot.internalAddresses)
    if case .parent = hop, case .ip(let address) = key.host,
      let refusal = dialGuard.refusal(address, port: key.port)
    {
      return completion(.failure(refusal))
    }
    let dial = Dial(key: key, route: route, hop: hop, dialGuard: dialGuard, http2: http2, started: started)
    connect(dial, on: loop, completion)
  }

  /// The first hop of a dial.
  private enum Hop {
    /// The host itself, at this address (its `connectTo` mapping, if any).
    case direct(HostPort)
    /// A parent proxy that opens a tunnel to the host.
    case parent(ParentProxy)
  }

  /// What one dial carries from step to step.
  private struct Dial {
    let key: UpstreamKey
    let route: UpstreamRoute
    let hop: Hop
    let dialGuard: DialGuard
    let http2: Bool
    let started: UInt64
  }

  /// Resolves the first hop, judges its addresses, connects, and hands the
  /// socket on (to the handshake, or first to the parent's tunnel).
  private func connect(
    _ dial: Dial, on loop: EventLoop, _ completion: @escaping (Result<DialedUpstream, ProxyFailure>) -> Void
  ) {
    let timeouts = snapshot.timeouts
    let (key, metrics) = (dial.key, self.metrics)
    nonisolated(unsafe) let completion = completion
    /// How a failure to reach the first hop is told: the host's own codes,
    /// or the parent's (counted per parent).
    @Sendable func unreachable(_ why: String, timedOut: Bool = false, refused: Bool = false) -> ProxyFailure {
      switch dial.hop {
      case .direct:
        if timedOut {
          var failure = ProxyFailure.timeout("no connection to \(key) within \(timeouts.upstreamConnect) s")
          failure.detail = why
          return failure
        }
        return .cannotConnect(key.description, detail: why, refused: refused)
      case .parent(let parent):
        metrics.parentProxyConnects.increment([parent.name, "unreachable"])
        return .parentUnreachable(parent, key.description, why: why)
      }
    }
    let (host, port): (String, Int)
    switch dial.hop {
    case .direct(let target): (host, port) = (target.host, target.port)
    case .parent(let parent): (host, port) = (parent.host, parent.port)
    }
    Resolver.resolve(host: host, port: port, on: loop) { resolved in
      let addresses: [SocketAddress]
      switch resolved {
      case .failure(let error): return completion(.failure(unreachable(error.description)))
      case .success(let found): addresses = found
      }
      for address in addresses {
        let refusal: ProxyFailure?
        switch dial.hop {
        case .direct: refusal = dial.dialGuard.refusal(address)
        case .parent(let parent):
          // An address that cannot be judged is not connected to.
          guard let ip = IPAddress(bytes: address.addressBytes) else {
            return completion(.failure(unreachable("\(address) is not an IP address")))
          }
          refusal = dial.dialGuard.parentRefusal(ip, port: address.port, parent: parent)
        }
        if let refusal { return completion(.failure(refusal)) }
      }
      Connector.connect(to: addresses, on: loop, timeout: timeouts.upstreamConnect) { connected in
        switch connected {
        case .failure(.timedOut(let why)): completion(.failure(unreachable(why, timedOut: true)))
        case .failure(.refused(let why)): completion(.failure(unreachable(why, refused: true)))
        case .failure(.unreachable(let why)): completion(.failure(unreachable(why)))
        case .success(let fd):
          switch dial.hop {
          case .direct(let target):
            let connection = Connection(fd: fd, peer: target.description, loop: loop)
            self.handshake(
              connection, key: key, route: dial.route, http2: dial.http2, loop: loop, completion)
          case .parent(let parent):
            self.tunnel(fd, through: parent, dial, on: loop, completion)
          }
        }
      }
    }
  }

  /// Asks `parent` for a tunnel to the host and port as the client named
  /// them, within what is left of `timeouts.upstreamConnect`, then the same
  /// handshake and trust decision as on a direct socket. A trust failure
  /// inside the tunnel keeps its own code; only the parent's no or its
  /// absence is the parent's.
  private func tunnel(
    _ fd: Int32, through parent: ParentProxy, _ dial: Dial, on loop: EventLoop,
    _ completion: @escaping (Result<DialedUpstream, ProxyFailure>) -> Void
  ) {
    let (key, metrics) = (dial.key, self.metrics)
    let target = key.description
    let connection = Connection(fd: fd, peer: "\(target) via \(parent.name)", loop: loop)
    // The parent is asked for the name as the client wrote it, without
    // an IPv6 literal's brackets (the tunnel adds them where its syntax needs).
    let host: String
    switch key.host {
    case .dns(let name): host = name
    case .ip(let address): host = address.description
    }
    let tunnel = ParentTunnel(kind: parent.kind, host: host, port: key.port, credentials: parent.credentials)
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - dial.started) / 1e9
    ParentDial(connection: connection, tunnel: tunnel) { outcome in
      switch outcome {
      case .open(let connection):
        metrics.parentProxyConnects.increment([parent.name, "open"])
        self.handshake(connection, key: key, route: dial.route, http2: dial.http2, loop: loop, completion)
      case .refused(let answer):
        metrics.parentProxyConnects.increment([parent.name, "refused"])
        completion(.failure(.parentRefused(parent, target, answer: answer)))
      case .failed(let why):
        metrics.parentProxyConnects.increment([parent.name, "unreachable"])
        completion(.failure(.parentUnreachable(parent, target, why: why)))
      }
    }.start(timeout: max(0.1, snapshot.timeouts.upstreamConnect - elapsed))
  }

  private func handshake(
    _ connection: Connection, key: UpstreamKey, route: UpstreamRoute, http2: Bool, loop: EventLoop,
    _ completion: @escaping (Result<DialedUpstream, ProxyFailure>) -> Void
  ) {
    // Plain: not read until its owner set itself as delegate and resumes it.
    guard key.tls else { return completion(.success(.plain(connection))) }
    guard let context = route.context else {
      connection.close()
      return completion(
        .failure(ProxyFailure(status: 502, code: .handshakeFailed, reason: "no TLS context for \(key)")))
    }
    let resumable = route.resumesSessions
    let resumed = resumable ? sessions.session(for: key) : nil
    let engine: TLSEngine
    do {
      engine = try context.makeEngine(serverName: key.host, resuming: resumed, offeringHTTP2: http2)
    } catch {
      connection.close()
      return completion(
        .failure(
          ProxyFailure(status: 502, code: .handshakeFailed, reason: "TLS setup failed: \(error.description)"))
      )
    }
    var trust = UpstreamTrust(
      key: key, route: route, engine: trustEngine.partition(loop.index), reporter: reporter)
    trust.revocation = revocationFetcher.map {
      UpstreamTrust.RevocationFetchRoute(fetcher: $0, dialer: self, loop: loop)
    }
    trust.resumedStaple = resumed?.staple
    trust.snapshot = snapshot
    trust.metrics = metrics
    trust.loopIndex = loop.index
    let channel = TLSChannel(
      connection: connection, engine: engine, checks: TLSChannel.Checks(established: trust.verdict(of:)))
    let sessions = self.sessions
    if resumable {
      let staple = trust.staple(of:)
      // Read once: the session is offered again after every response, and
      // the staple does not change within a connection. On the loop only.
      var kept: [UInt8]??
      // Stored once per session the connection holds: a keep-alive
      // connection's responses would otherwise each make a session object and
      // take the shared cache's lock. `stored` moves only when a resumable
      // session was stored, because OpenSSL fills the first TLS 1.3 ticket
      // into the handshake's session in place (same address, resumable only
      // from then on) and copies the session for each later ticket.
      var stored: UnsafeRawPointer?
      channel.storeSession = { engine in
        guard let current = engine.currentSessionAddress, current != stored else { return }
        if kept == nil { kept = .some(staple(engine)) }
        if let session = TLSSession(from: engine, staple: kept!) {
          sessions.store(session, for: key)
          stored = current
        }
      }
    }
    let metrics = self.metrics
    channel.start(timeout: snapshot.timeouts.tlsHandshake) { result in
      switch result {
      case .success:
        let tls: UpstreamTLS = engine.sessionReused ? .resumed : .full
        metrics.upstreamHandshake(tls)
        channel.rememberSession()
        completion(
          .success(
            DialedUpstream(
              channel: channel, tls: tls, negotiated: channel.negotiatedProtocol,
              rememberSession: channel.rememberSession,
              // Only TLS 1.3 refuses after our Finished (RFC 8446 §4.4.2.4);
              // under TLS 1.2 a refusal fails the handshake itself.
              certificateRequestUnanswered: engine.certificateRequestUnanswered && engine.isTLS13)))
      case .failure(let failure):
        completion(.failure(trust.failure(failure, tls: engine)))
      }
    }
  }
}
