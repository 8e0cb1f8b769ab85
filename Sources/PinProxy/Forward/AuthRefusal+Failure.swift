extension ProxyFailure {
  /// A proxy-authentication refusal as the client gets it: `407` and `429`
  /// under `proxy-auth-required`, a `503` under `over-capacity` (the proxy's
  /// own budget for hashing, not the client's credential).
  init(_ refusal: AuthRefusal) {
    self.init(
      status: refusal.status, code: refusal.status == 503 ? .overCapacity : .proxyAuthRequired,
      reason: refusal.reason, headers: refusal.headers)
  }
}
