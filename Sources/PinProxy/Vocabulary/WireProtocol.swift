/// The HTTP spoken on one side of an exchange: to the origin, or by the
/// client (inside an intercepted CONNECT, ALPN decides). For `Via`, the
/// access log and metrics; the raw values are the ALPN identifiers (RFC 7301).
enum WireProtocol: String, Sendable {
  case http1 = "http/1.1"
  case http2 = "h2"

  /// What ALPN's answer means for the HTTP spoken: no answer, or one other
  /// than `h2`, is HTTP/1.1 (the only other protocol we offer or select).
  init(alpn: String?) {
    self = alpn == WireProtocol.http2.rawValue ? .http2 : .http1
  }
}

/// How an upstream connection's TLS began, for the access log and metrics.
enum UpstreamTLS: String, Sendable, CaseIterable {
  /// Plain HTTP (a rule with `allowsInsecureHTTPLoads`).
  case none
  /// A full handshake.
  case full
  /// An abbreviated handshake resuming a cached session.
  case resumed
}
