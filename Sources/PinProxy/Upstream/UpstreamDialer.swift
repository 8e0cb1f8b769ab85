import Foundation
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
  func open(
    _ key: UpstreamKey, route: UpstreamRoute, on loop: EventLoop, http2: Bool = false,
    _ completion: @escaping (Result<DialedUpstream, ProxyFailure>) -> Void
  ) {
    loop.preconditionInLoop()
    let (target, mapped) = snapshot.connectAddress(host: key.host, port: key.port)
    let timeouts = snapshot.timeouts
    let guardsInternal = !route.namedExplicitly && !mapped
    let guardsOwn = guardsInternal || route.followsCertificate
    let guardsEgress = guardsInternal && route.governedByDefaults
    let internalAddresses = snapshot.internalAddresses
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
    if let parent = route.parent {
      return openThroughParent(parent, key, route: route, on: loop, http2: http2, completion)
    }
    Resolver.resolve(host: target.host, port: target.port, on: loop) { resolved in
      switch resolved {
      case .failure(let error):
        completion(.failure(.cannotConnect(key.description, detail: error.description)))
      case .success(let addresses):
        // Judged on the resolved addresses, so a name that resolves to
        // 127.0.0.1 is refused like the literal.
        if guardsOwn {
          for address in addresses {
            // An address that cannot be judged is refused, not let through.
            let refusal =
              IPAddress(bytes: address.addressBytes).map {
                guardsEgress
                  ? internalAddresses.egressRefusal($0, port: address.port)
                  : guardsInternal
                    ? internalAddresses.refusal($0, port: address.port)
                    : internalAddresses.ownListener($0, port: address.port)
              } ?? "\(address) is not an IP address"
            guard let refusal else { continue }
            let reason =
              route.followsCertificate
              ? "a certificate's URL \(key) leads to an internal address; only a domain rule or connectTo"
                + " entry that names the host lets it, and never to this proxy's own listeners"
              : "\(key) is reached only through a domain rule that names it"
            return completion(
              .failure(ProxyFailure(status: 403, code: .deniedByPolicy, reason: reason, detail: refusal)))
          }
        }
        Connector.connect(to: addresses, on: loop, timeout: timeouts.upstreamConnect) { connected in
          switch connected {
          case .failure(.timedOut(let reason)):
            var failure = ProxyFailure.timeout(
              "no connection to \(key) within \(timeouts.upstreamConnect) s")
            failure.detail = reason
            completion(.failure(failure))
          case .failure(.refused(let reason)):
            completion(.failure(.cannotConnect(key.description, detail: reason, refused: true)))
          case .failure(.unreachable(let reason)):
            completion(.failure(.cannotConnect(key.description, detail: reason)))
          case .success(let fd):
            self.handshake(
              Connection(fd: fd, peer: target.description, loop: loop), key: key, route: route, http2: http2,
              loop: loop, completion)
          }
        }
      }
    }
  }

  /// Through `route.parent`: connect to the parent, ask it for a tunnel to
  /// the host and port as the client named them (the parent resolves the
  /// name; `connectTo` maps direct dials only), then the same handshake and
  /// trust decision as on a direct socket — all within
  /// `timeouts.upstreamConnect`. A trust failure inside the tunnel keeps its
  /// own code; only the parent's no or its absence is the parent's.
  ///
  /// The internal-address guard judges what pinproxy connects to, which is
  /// the parent here: where the parent connects is its own decision, made
  /// with its own view of the network. A target written as an IP literal
  /// is still judged, as for a direct dial.
  private func openThroughParent(
    _ parent: ParentProxy, _ key: UpstreamKey, route: UpstreamRoute, on loop: EventLoop, http2: Bool,
    _ completion: @escaping (Result<DialedUpstream, ProxyFailure>) -> Void
  ) {
    let timeouts = snapshot.timeouts
    // As for a direct dial: an unnamed host never reaches an internal
    // address, and a certificate's URL never this proxy's own listeners
    // (a parent on this host would connect there for it).
    let guardsInternal = !route.namedExplicitly
    if case .ip(let address) = key.host, guardsInternal || route.followsCertificate,
      let refusal = guardsInternal
        ? (route.governedByDefaults
          ? snapshot.internalAddresses.egressRefusal(address, port: key.port)
          : snapshot.internalAddresses.refusal(address, port: key.port))
        : snapshot.internalAddresses.ownListener(address, port: key.port)
    {
      return completion(
        .failure(
          ProxyFailure(
            status: 403, code: .deniedByPolicy,
            reason: "\(key) is reached only through a domain rule that names it",
            detail: refusal)))
    }
    let started = DispatchTime.now().uptimeNanoseconds
    let metrics = self.metrics
    let target = key.description
    nonisolated(unsafe) let completion = completion
    nonisolated(unsafe) let fail = { (result: String, failure: ProxyFailure) in
      metrics.parentProxyConnects.increment([parent.name, result])
      completion(.failure(failure))
    }
    Resolver.resolve(host: parent.host, port: parent.port, on: loop) { resolved in
      guard case .success(let addresses) = resolved else {
        if case .failure(let error) = resolved {
          fail("unreachable", .parentUnreachable(parent, target, why: error.description))
        }
        return
      }
      Connector.connect(to: addresses, on: loop, timeout: timeouts.upstreamConnect) { connected in
        let fd: Int32
        switch connected {
        case .failure(.timedOut(let why)), .failure(.refused(let why)), .failure(.unreachable(let why)):
          return fail("unreachable", .parentUnreachable(parent, target, why: why))
        case .success(let connected):
          fd = connected
        }
        let connection = Connection(fd: fd, peer: "\(target) via \(parent.name)", loop: loop)
        // The parent is asked for the name as the client wrote it, without
        // an IPv6 literal's brackets (the tunnel adds them where its syntax needs).
        let host: String
        switch key.host {
        case .dns(let name): host = name
        case .ip(let address): host = address.description
        }
        let tunnel = ParentTunnel(
          kind: parent.kind, host: host, port: key.port, credentials: parent.credentials)
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        ParentDial(connection: connection, tunnel: tunnel) { outcome in
          switch outcome {
          case .open(let connection):
            metrics.parentProxyConnects.increment([parent.name, "open"])
            self.handshake(connection, key: key, route: route, http2: http2, loop: loop, completion)
          case .refused(let answer):
            fail("refused", .parentRefused(parent, target, answer: answer))
          case .failed(let why):
            fail("unreachable", .parentUnreachable(parent, target, why: why))
          }
        }.start(timeout: max(0.1, timeouts.upstreamConnect - elapsed))
      }
    }
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
              certificateRequestUnanswered: engine.certificateRequestUnanswered)))
      case .failure(let failure):
        completion(.failure(trust.failure(failure, tls: engine)))
      }
    }
  }
}
