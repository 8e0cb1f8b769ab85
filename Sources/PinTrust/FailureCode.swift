/// The stable failure codes (docs/CONTRACTS.md): they appear in logs, in 502 bodies,
/// in the `Pinproxy-Error` header and as metric labels. Never rename one.
public enum FailureCode: String, Sendable, CaseIterable {
  case untrustedChain = "untrusted-chain"
  /// A certificate breaks the RFC 5280 / CA/Browser Forum profile.
  case malformedCertificate = "malformed-certificate"
  case hostnameMismatch = "hostname-mismatch"
  case expired = "expired"
  case pinMismatch = "pin-mismatch"
  case noPins = "no-pins"
  case selfSignedRequiresPinning = "self-signed-requires-pinning"
  case dynamicPinsUntrusted = "dynamic-pins-untrusted"
  case dynamicPinsEmpty = "dynamic-pins-empty"
  /// Fewer valid SCTs from distinct known CT logs than `minimumSCTs`.
  case ctRequired = "ct-required"
  case tlsVersion = "tls-version"
  case weakCipher = "weak-cipher"
  case weakKey = "weak-key"
  case handshakeFailed = "handshake-failed"
  case upstreamUnreachable = "upstream-unreachable"
  case upstreamTimeout = "upstream-timeout"
  case deniedByPolicy = "denied-by-policy"
  case badRequest = "bad-request"
  /// The proxy's own budget is spent (upstream sockets per client address
  /// or in all, a connection's upstream exchanges): the newest work is
  /// refused, what runs goes on (503).
  case overCapacity = "over-capacity"
  /// A forward listener with `proxyAuth` got no valid credential (407), or
  /// too many wrong ones from the client's address (429).
  case proxyAuthRequired = "proxy-auth-required"
  /// The client may not use the listener: its address is outside
  /// `allowedClients` (closed at accept), or its certificate is not one the
  /// listener allows (a TLS alert). Logged only; no HTTP answer.
  case clientNotAllowed = "client-not-allowed"
  /// A valid CRL or OCSP response (stapled, fetched or supplied) says a
  /// certificate of the path was revoked.
  case revoked = "revoked"
  /// Revocation information the rule or the certificate requires is
  /// missing or not valid (must-staple, `crl: require`, `ocsp: hardFail`,
  /// a supplied CRL that does not verify).
  case revocationUnknown = "revocation-unknown"
  /// A CONNECT would be spliced raw (a listener with `intercept: false`, or
  /// a `passthrough` pattern) to a host whose rule pins: nothing could
  /// check the pins, so it is refused (403) unless a `passthrough` entry
  /// names that very host, waiving them on purpose.
  case pinsNotEnforceable = "pins-not-enforceable"
  /// The parent proxy a rule goes through (`parentProxy`) said no to the
  /// tunnel — 407 (credentials missing or wrong), 403, 5xx, a SOCKS5
  /// refusal: 502, the parent's name and its answer in the reason. A trust
  /// failure inside an open tunnel keeps its own code.
  case parentProxyRefused = "parent-proxy-refused"
  /// The parent proxy could not be reached, or did not open the tunnel
  /// within `timeouts.upstreamConnect`: 502.
  case parentProxyUnreachable = "parent-proxy-unreachable"
}
