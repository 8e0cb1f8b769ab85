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
  /// Under TLS 1.3, the origin asked for a client certificate and was sent
  /// none (the rule has no `clientIdentity`): if it goes away before
  /// answering, it most likely refused the handshake
  /// (`refusalForMissingCertificate`).
  var certificateRequestUnanswered = false

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

  /// The failure to report when this connection closed or was reset before
  /// the origin sent a byte, if the reason is that it wanted a client
  /// certificate: under TLS 1.3 the server's refusal comes after our side
  /// finished the handshake (RFC 8446 §4.4.2.4, `certificate_required`),
  /// and a reset that follows it on the wire can discard the alert before
  /// it is read. Nil for anything else (a connection that has answered, or
  /// one to which no certificate was missing).
  func refusalForMissingCertificate(key: UpstreamKey, heardFromOrigin: Bool) -> ProxyFailure? {
    guard certificateRequestUnanswered, !heardFromOrigin else { return nil }
    return ProxyFailure(
      status: 502, code: .handshakeFailed, reason: "\(key) refused the TLS session",
      detail:
        "it asked for a client certificate, the rule has none (clientIdentity), and it closed the connection"
        + " before answering: most likely it requires one")
  }

  /// Abandons a channel nobody took (its session went away during the dial).
  func close() { channel.close() }
}
