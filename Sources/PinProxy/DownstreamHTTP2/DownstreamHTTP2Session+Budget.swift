import PinEventLoop

/// What one HTTP/2 client connection may cause: at most
/// `maxUpstreamExchanges` streams acquire or hold an upstream (the rest
/// wait in `queued`, each within `timeouts.upstreamResponse`, which the
/// stream's timer enforces), and response bytes held for a slow reader are
/// bounded per stream, per connection and in all (`UpstreamBudget.bufferedBytes`).
extension DownstreamHTTP2Session {
  func startOrQueue(_ stream: DownstreamHTTP2Stream) {
    if upstreamExchanges >= Self.maxUpstreamExchanges {
      stream.hold = .queue
      queued.append(stream)
    } else {
      stream.run { $0.start(&$1) }
    }
  }

  /// Queued streams take the upstream slots that came free.
  func startQueued() {
    while !queued.isEmpty && upstreamExchanges < Self.maxUpstreamExchanges {
      let stream = queued.removeFirst()
      guard stream.hold == .queue, streams[stream.id] === stream else { continue }
      stream.hold = .none
      stream.run { $0.start(&$1) }
    }
  }

  /// Whether `stream`'s upstream must stay paused: its own response, this
  /// connection's, or (for a connection that is itself behind) everyone's
  /// buffered bytes are past their bounds, or the socket is backed up.
  /// Each pause leaves at most one more read (≤ 64 KiB) per stream.
  func pausesUpstream(of stream: DownstreamHTTP2Stream) -> Bool {
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
