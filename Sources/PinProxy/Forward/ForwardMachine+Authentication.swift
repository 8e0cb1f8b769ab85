import PinHTTP

/// Proxy authentication on the HTTP/1.1 connection (`proxyAuth`): the
/// verdicts are `ProxyAuthGate`'s; here they become the machine's state
/// and actions (a new credential hashed off the loop while the connection
/// waits in `.authenticating`).
extension ForwardMachine {
  /// Before anything is routed or dialled: true when the request may go on
  /// now (see `ProxyAuthGate.admit`; fail closed).
  mutating func authorize(_ head: HTTPRequestHead, _ authenticator: ProxyAuthenticator) -> Bool {
    switch authGate.admit(head, under: authenticator, inTunnel: tunnel != nil, client: client) {
    case .proceed:
      return true
    case .refuse(let failure):
      fail(failure, request: head)
      return false
    case .verify(let pending):
      state = .authenticating(head)
      actions.append(.pauseClient)
      actions.append(.verifyCredential(pending, authenticator))
      return false
    }
  }

  /// The hashed credential's verdict: the request goes on, or is refused.
  mutating func credentialChecked(_ decision: ProxyAuthenticator.Decision) {
    guard case .authenticating(let head) = state else { return }
    if let failure = authGate.checked(
      decision, for: head, under: router.authenticator, listenerRefusal: router.refusal)
    {
      return fail(failure, request: head)
    }
    state = .awaitingRequest
    dispatch(head)
    process()
  }
}
