import PinHTTP

/// The session's side of its upstream links: what a link reports
/// (`UpstreamDelegate`), handed to the machine under the link's handle,
/// and the links the machine names by handle (`UpstreamLinks`), resolved
/// for `performUpstreamSide`.
extension ForwardSession {
  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent]) {
    // A link this session does not hold has nothing to say to it: closed,
    // as the machine closes an upstream that serves none of its exchanges.
    guard let handle = upstreams.handle(of: upstream) else { return upstream.close() }
    let draining = context.isDraining
    run { $0.upstreamEvents(events, from: handle, draining: draining) }
  }

  func upstreamDidDrain(_ upstream: any UpstreamLink) {
    guard let handle = upstreams.handle(of: upstream) else { return }
    run { $0.upstreamDrained(handle) }
  }

  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    // Let go of before the machine hears of it (its closing action, if
    // any, then finds nothing to close).
    guard let handle = upstreams.letGo(closed: upstream) else { return }
    let mayRetry = upstream.mayRetryAfterClose
    run { $0.upstreamClosed(handle, failure: failure, mayRetry: mayRetry) }
  }

  func link(_ upstream: UpstreamRef) -> (any UpstreamLink)? { upstreams[upstream] }
  func letGo(_ upstream: UpstreamRef) -> (any UpstreamLink)? { upstreams.letGo(upstream) }
}
