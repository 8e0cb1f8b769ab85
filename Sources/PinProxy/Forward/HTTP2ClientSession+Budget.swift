import PinEventLoop

/// What one HTTP/2 client connection may cause, and its streams' clock
/// before the origin is reached: at most `maxUpstreamExchanges` streams
/// acquire or hold an upstream (the rest wait in `queued`), every stream is
/// answered within `timeouts.upstreamResponse`, and response bytes held for
/// a slow reader are bounded per stream, per connection and in all
/// (`UpstreamBudget.bufferedBytes`).
extension HTTP2ClientSession {
  /// Streams acquiring or holding an upstream.
  var upstreamExchanges: Int {
    streams.values.reduce(0) { count, stream in
      switch stream.state {
      case .connecting where !stream.awaitingBody && !stream.queuedForUpstream, .exchanging: count + 1
      default: count
      }
    }
  }

  func startOrQueue(_ stream: HTTP2ClientStream) {
    if upstreamExchanges >= Self.maxUpstreamExchanges {
      stream.queuedForUpstream = true
      queued.append(stream)
    } else {
      acquire(stream, poolAllowed: true)
    }
  }

  /// Queued streams take the upstream slots that came free.
  func startQueued() {
    while !queued.isEmpty && upstreamExchanges < Self.maxUpstreamExchanges {
      let stream = queued.removeFirst()
      guard stream.queuedForUpstream, streams[stream.id] === stream else { continue }
      stream.queuedForUpstream = false
      acquire(stream, poolAllowed: true)
    }
  }

  /// The stream's timer before its request reaches the origin: a body that
  /// never completes, or a turn that never comes, ends in a refusal.
  func arm(_ stream: HTTP2ClientStream) {
    let seconds = snapshot.timeouts.upstreamResponse
    stream.responseTimer = loop.schedule(after: seconds) { [weak self, weak stream] in
      guard let self, let stream, self.streams[stream.id] === stream, case .connecting = stream.state else {
        return
      }
      if stream.awaitingBody {
        self.fail(
          stream,
          ProxyFailure(
            status: 408, code: .badRequest, reason: "request body not received within \(seconds) s"))
      } else if stream.queuedForUpstream {
        stream.queuedForUpstream = false
        self.fail(
          stream,
          ProxyFailure(
            status: 503, code: .overCapacity,
            reason: "no upstream slot of this connection came free within \(seconds) s"))
      } else {
        return
      }
      self.flush()
    }
  }

  /// Whether `stream`'s upstream must stay paused: its own response, this
  /// connection's, or (for a connection that is itself behind) everyone's
  /// buffered bytes are past their bounds, or the socket is backed up.
  /// Each pause leaves at most one more read (≤ 64 KiB) per stream.
  func pausesUpstream(of stream: HTTP2ClientStream) -> Bool {
    let connection = session.bufferedBodyBytesTotal
    return session.bufferedBodyBytes(stream: stream.id) >= Self.highWatermark
      || connection >= Self.connectionBufferLimit || client.isAboveHighWatermark
      || (connection >= Self.slowConnectionFloor
        && context.budget.bufferedBytes.load(ordering: .relaxed) >= UpstreamBudget.bufferedBytesLimit)
  }

  /// Keeps the process-wide count of buffered response bytes in step with this connection's.
  func reportBuffered(_ bytes: Int) {
    guard bytes != bufferedReported else { return }
    context.budget.bufferedBytes.add(bytes - bufferedReported, ordering: .relaxed)
    bufferedReported = bytes
  }

}
