import PinEventLoop

/// What `UpstreamDialer` hands out: a trusted channel and what the dial
/// learnt about it (TLS or not, resumed or full, the protocol ALPN settled
/// on), so that whoever puts a codec or a splice on the channel is told
/// these facts instead of recovering them by asking what type the channel is.
///
/// Used on the channel's loop only, like the channel.
struct DialedUpstream {
  let channel: any ByteChannel
  let tls: UpstreamTLS
  /// `.http2` only when the origin chose `h2` in ALPN; speaking HTTP/1.1 on
  /// such a channel is never a fallback.
  let negotiated: WireProtocol
  /// Stores the TLS session for resumption again; nothing for plain TCP or
  /// a rule that does not resume. TLS 1.3 tickets arrive after the
  /// handshake, so an owner calls this once a response has been read.
  let rememberSession: () -> Void

  /// A plain TCP connection (passthrough, `allowsInsecureHTTPLoads`).
  static func plain(_ channel: any ByteChannel) -> DialedUpstream {
    DialedUpstream(channel: channel, tls: .none, negotiated: .http1, rememberSession: {})
  }

  /// Closes a channel its owner is done with: an established TLS session
  /// ends with close_notify so it stays resumable (OpenSSL marks one freed
  /// without it as not resumable); plain TCP closes at once, so nothing
  /// queued for an abandoned exchange is sent after all.
  func closeKeepingSession() {
    if tls == .none { channel.close() } else { channel.closeAfterFlush() }
  }

  /// Abandons a channel nobody took (its session went away during the dial).
  func close() { channel.close() }
}
