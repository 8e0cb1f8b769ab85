import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// The upstream half of a forward session: sending the request, relaying the
/// response with back-pressure, and returning the connection to the pool.
extension ForwardSession: UpstreamDelegate {
  func attach(_ upstream: UpstreamConnection, to exchange: Exchange) {
    upstream.delegate = self
    upstream.mode = .http
    upstream.expectResponse(to: exchange.request.method)
    exchange.upstream = upstream
    exchange.upstreamWasPooled = upstream.reusedFromPool
    exchange.upstreamTLS = upstream.engine == nil ? "none" : (upstream.sessionResumed ? "resumed" : "full")
    exchange.requestChunked = exchange.request.framing == .chunked
    upstream.send(
      ForwardedHead.request(
        exchange.request, target: exchange.path, authority: authority(of: exchange.key), via: "1.1 pinproxy"))
    state = .exchanging(exchange)
    let seconds = snapshot.timeouts.upstreamResponse
    exchange.responseTimer = loop.schedule(after: seconds) { [weak self] in
      guard let self, case .exchanging(let current) = self.state, current === exchange,
        !exchange.responseStarted
      else {
        return
      }
      self.fail(
        .timeout("\(exchange.key) sent no response within \(seconds) s"), exchange.request, exchange: exchange
      )
    }
    process()
  }

  func sendRequestBody(_ bytes: [UInt8], _ exchange: Exchange) {
    guard let upstream = exchange.upstream else { return }
    exchange.requestBodyBytes += bytes.count
    upstream.send(exchange.requestChunked ? HTTPSerializer.chunk(bytes) : bytes)
    // Back-pressure: stop reading the client while the upstream is backed up.
    if upstream.isAboveHighWatermark { client.pauseReading() }
  }

  func finishRequestBody(_ exchange: Exchange, trailers: HTTPHeaders) {
    if exchange.requestChunked {
      exchange.upstream?.send(HTTPSerializer.lastChunk(trailers: ForwardedHead.trailers(trailers)))
    }
    exchange.requestComplete = true
  }

  private func authority(of key: UpstreamKey) -> String {
    let defaultPort = key.tls ? 443 : 80
    return key.port == defaultPort ? key.host.description : "\(key.host):\(key.port)"
  }

  // MARK: UpstreamDelegate

  func upstream(_ upstream: UpstreamConnection, didReceive events: [HTTP1Parser.Event]) {
    guard case .exchanging(let exchange) = state, exchange.upstream === upstream else {
      return upstream.close()
    }
    for event in events {
      switch event {
      case .request: break
      case .response(let head): relayHead(head, exchange)
      case .body(let bytes):
        exchange.responseBodyBytes += bytes.count
        client.write(exchange.responseChunked ? HTTPSerializer.chunk(bytes) : bytes)
      case .end(let trailers):
        if exchange.inInterimResponse {
          exchange.inInterimResponse = false
        } else {
          if exchange.responseChunked {
            client.write(HTTPSerializer.lastChunk(trailers: ForwardedHead.trailers(trailers)))
          }
          return finishExchange(exchange)
        }
      }
    }
    // Back-pressure: a slow client stops the upstream being read.
    if client.isAboveHighWatermark { upstream.pauseReading() }
  }

  private func relayHead(_ head: HTTPResponseHead, _ exchange: Exchange) {
    exchange.responseTimer?.cancel()
    if (100..<200).contains(head.status) {
      exchange.inInterimResponse = true
      // 101 would switch protocols, which this proxy does not relay.
      if head.status != 101 && exchange.request.version == .http11 {
        client.write(
          HTTPSerializer.responseHead(HTTPResponseHead(status: head.status, reason: head.reason)))
      }
      return
    }
    exchange.responseStarted = true
    exchange.responseStatus = head.status
    exchange.upstreamKeepsAlive = head.keepAlive
    if context.isDraining { exchange.closeAfterResponse = true }
    let (bytes, framing) = ForwardedHead.response(
      head, clientVersion: exchange.request.version, closing: exchange.closeAfterResponse, via: "1.1 pinproxy"
    )
    exchange.responseChunked = framing == .chunked
    if framing == .untilClose { exchange.closeAfterResponse = true }
    client.write(bytes)
  }

  private func finishExchange(_ exchange: Exchange) {
    exchange.responseTimer?.cancel()
    servedRequests += 1
    if let upstream = exchange.upstream {
      upstream.rememberSession()
      if exchange.requestComplete && exchange.upstreamKeepsAlive && upstream.isReusable {
        pool.put(
          upstream, idleTimeout: snapshot.timeouts.upstreamIdle, maxIdle: snapshot.limits.maxIdlePerUpstream)
      } else {
        upstream.close()
      }
    }
    exchange.upstream = nil
    context.metrics.increment(
      "pinproxy_requests_total", [listener.name, ProxyMetrics.statusClass(exchange.responseStatus)])
    logAccess(exchange)
    // A response that ended before the request body did leaves the client's
    // stream mid-message: the connection cannot carry another request.
    if exchange.closeAfterResponse || !exchange.requestComplete || context.isDraining {
      state = .closing
      return client.closeAfterFlush()
    }
    state = .awaitingRequest
    awaitingSince = DispatchTime.now().uptimeNanoseconds
    armHeadTimer(idle: true)
    parseNextRequest()
  }

  private func logAccess(_ exchange: Exchange) {
    guard context.logger.access else { return }
    let elapsed = Date().timeIntervalSince(exchange.started)
    context.logger.log(
      .info, "request",
      [
        "client": exchange.client, "method": exchange.request.method, "host": exchange.key.description,
        "path": String(exchange.path.prefix(200)), "status": String(exchange.responseStatus),
        "sent": String(exchange.requestBodyBytes), "received": String(exchange.responseBodyBytes),
        "upstream_ms": String(Int(elapsed * 1000)),
        "upstream_connection": exchange.upstreamWasPooled ? "pooled" : "new",
        "upstream_tls": exchange.upstreamTLS,
      ])
  }

  func upstreamDidDrain(_ upstream: UpstreamConnection) {
    if case .splicing(let current, _) = state, current === upstream { return client.resumeReading() }
    guard case .exchanging(let exchange) = state, exchange.upstream === upstream else { return }
    process()
  }

  func upstream(_ upstream: UpstreamConnection, didReceiveRaw bytes: [UInt8]) {
    guard case .splicing(let current, let idle) = state, current === upstream else { return upstream.close() }
    idle.touch()
    client.write(bytes)
    if client.isAboveHighWatermark { upstream.pauseReading() }
  }

  func upstreamDidFinishSending(_ upstream: UpstreamConnection) {
    guard case .splicing(let current, _) = state, current === upstream else { return }
    upstreamSplicedDone = true
    client.shutdownOutput()
    finishSpliceIfDone()
  }

  func upstreamDidClose(_ upstream: UpstreamConnection, failure: ProxyFailure?) {
    if case .splicing(let current, let idle) = state, current === upstream {
      idle.cancel()
      state = .closing
      return client.closeAfterFlush()
    }
    guard case .exchanging(let exchange) = state, exchange.upstream === upstream else { return }
    exchange.upstream = nil
    if exchange.responseStarted {
      // Part of the response was sent: only closing tells the client it is cut short.
      return closeNow()
    }
    // A pooled connection the origin closed while idle: one fresh attempt,
    // when nothing of a request body was sent.
    if upstream.reusedFromPool && !exchange.retried && exchange.requestBodyBytes == 0 {
      exchange.retried = true
      exchange.responseTimer?.cancel()
      state = .connecting(exchange)
      let dialer = context.dialer(for: snapshot)
      dialer.open(exchange.key, route: exchange.route, on: loop) { [weak self] result in
        guard let self, case .connecting(let current) = self.state, current === exchange else { return }
        switch result {
        case .success(let fresh): self.attach(fresh, to: exchange)
        case .failure(let failure): self.fail(failure, exchange.request, exchange: exchange)
        }
      }
      return
    }
    fail(
      failure ?? .unreachable("\(exchange.key) closed the connection without a response"), exchange.request,
      exchange: exchange)
  }
}
