import PinEventLoop

/// How a forward session gets an upstream for an exchange: an idle
/// HTTP/1.1 connection from the pool, a stream on an open HTTP/2
/// connection, the dial already under way for the same key, or a new dial
/// whose ALPN answer decides the protocol.
extension ForwardSession {
  func acquireUpstream(exchange id: Int, _ target: ForwardTarget, poolAllowed: Bool) {
    let key = target.key
    if poolAllowed, let pooled = pool.take(key) {
      return ready(pooled, exchange: id, pooled: true)
    }
    let http2 = pool.http2
    let offersHTTP2 = target.route.offersHTTP2 && key.tls
    if offersHTTP2 && http2.mayOfferHTTP2(key) {
      if let stream = http2.stream(for: key) {
        return ready(stream, exchange: id, pooled: stream.reusedFromPool)
      }
      let waiting = http2.join(key) { [weak self] outcome in
        guard let self else {
          if case .stream(let stream) = outcome { stream.close() }
          return
        }
        switch outcome {
        case .stream(let stream): self.ready(stream, exchange: id, pooled: false)
        case .acquireAgain: self.acquireUpstream(exchange: id, target, poolAllowed: poolAllowed)
        case .failed(let failure): self.run { $0.dialFailed(failure, exchange: id) }
        }
      }
      if waiting { return }
      http2.beginDial(key)
    }
    dial(exchange: id, target, http2: offersHTTP2)
  }

  private func dial(exchange id: Int, _ target: ForwardTarget, http2: Bool) {
    let (key, limits, metrics) = (target.key, snapshot.httpLimits, context.metrics)
    let h2Pool = pool.http2
    let idleTimeout = snapshot.timeouts.upstreamIdle
    context.dialer(for: snapshot).open(key, route: target.route, on: loop, http2: http2) {
      [weak self] result in
      switch result {
      case .success(let channel):
        let link: any UpstreamLink
        if (channel as? TLSChannel)?.applicationProtocol == "h2",
          let connection = try? HTTP2UpstreamConnection(
            key: key, channel: channel,
            tls: (channel as? TLSChannel)?.sessionResumed == true ? .resumed : .full,
            metrics: metrics)
        {
          h2Pool.add(connection, idleTimeout: idleTimeout)
          guard let stream = connection.reserveStream() else {
            connection.close()
            h2Pool.dialed(key, .failure(.unreachable("\(key) allows no HTTP/2 stream")))
            self?.run { $0.dialFailed(.unreachable("\(key) allows no HTTP/2 stream"), exchange: id) }
            return
          }
          h2Pool.dialed(key, .success(connection))
          link = stream
        } else {
          metrics.upstreamConnections.increment([UpstreamProtocol.http1.rawValue])
          if http2 { h2Pool.dialed(key, .success(nil)) }
          link = UpstreamConnection(key: key, channel: channel, limits: limits)
        }
        guard let self else { return link.close() }
        self.ready(link, exchange: id, pooled: false)
      case .failure(let failure):
        if http2 { h2Pool.dialed(key, .failure(failure)) }
        self?.run { $0.dialFailed(failure, exchange: id) }
      }
    }
  }

  private func ready(_ link: any UpstreamLink, exchange id: Int, pooled: Bool) {
    run {
      $0.upstreamReady(
        UpstreamRef(link: link), exchange: id, pooled: pooled, tls: link.tls, protocol: link.protocolName)
    }
  }
}
