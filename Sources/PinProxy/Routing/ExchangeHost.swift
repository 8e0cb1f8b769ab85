/// Whoever carries out an exchange's actions: the HTTP/1.1 session for the
/// request it is serving, an HTTP/2 stream for its own. What differs
/// between them — how an upstream is acquired and answered, where the
/// timer for the exchange's response deadline lives, how request-body back-pressure is applied, what an
/// access line says of the client — is asked of the host; what is the same
/// (the upstream I/O, release or close, the record) is `performUpstreamSide`,
/// the one executor of the upstream side of an exchange.
///
/// Confined to the host's loop: every requirement is called on it.
protocol ExchangeHost: UpstreamDelegate {
  /// Take a pooled connection or dial one for the current exchange; the
  /// answer goes to its machine (`upstreamReady` or `dialFailed`).
  func acquireUpstream(poolAllowed: Bool)
  /// `count` request-body bytes went upstream; `backedUp` when the link
  /// holds more than its high watermark (the host stops taking more: an
  /// HTTP/1.1 client stops being read, an h2 stream's window stays closed).
  func requestBodySent(_ count: Int, backedUp: Bool)
  /// The exchange completed cleanly: the link keeps what can serve another
  /// (`UpstreamLink.release`), under the snapshot in force.
  func releaseUpstream(_ link: any UpstreamLink)
  /// The request of exchange `id` as its upstream link sends it; nil when
  /// that exchange is no longer the host's current one (its upstream is
  /// being closed by a later action).
  func forwardedRequest(exchange id: Int) -> ForwardedRequest?
  /// The access line and metrics of the exchange that just finished (its
  /// machine's `record`).
  func reportFinishedExchange()
  /// The link `upstream` names while the host holds it (`UpstreamLinks`).
  func link(_ upstream: UpstreamRef) -> (any UpstreamLink)?
  /// Stops holding the link `upstream` names and returns it; nil when the
  /// host let go of it already.
  func letGo(_ upstream: UpstreamRef) -> (any UpstreamLink)?
}

extension ExchangeHost {
  /// Carries out the upstream half of an exchange's actions; the response
  /// half is the client's protocol's to frame.
  @inline(__always)
  func performUpstreamSide(_ action: UpstreamAction<UpstreamRef>) {
    switch action {
    case .acquireUpstream(let poolAllowed):
      acquireUpstream(poolAllowed: poolAllowed)
    case .sendHead(let upstream, let id):
      guard let request = forwardedRequest(exchange: id), let link = link(upstream) else { return }
      link.delegate = self
      link.sendHead(request)
    case .sendBody(let upstream, let bytes):
      guard let link = link(upstream) else { return }
      link.sendBody(bytes)
      requestBodySent(bytes.count, backedUp: link.isAboveHighWatermark)
    case .endBody(let upstream, let trailers):
      link(upstream)?.endBody(trailers: trailers)
    case .releaseUpstream(let upstream):
      if let link = letGo(upstream) { releaseUpstream(link) }
    case .closeUpstream(let upstream):
      letGo(upstream)?.close()
    case .record:
      reportFinishedExchange()
    }
  }
}
