import PinHTTP

/// Proxy authentication on the HTTP/1.1 connection (`proxyAuth`): each
/// request's credential checked before it is routed, a new one hashed off
/// the loop while the connection waits (`.authenticating`), a CONNECT's
/// inherited by the requests inside its tunnel.
extension ForwardMachine {
  /// Proxy authentication (`proxyAuth`), before anything is routed or
  /// dialled: true when the request may go on now. A request outside a
  /// tunnel must carry a credential; one inside an intercepted CONNECT
  /// inherits the CONNECT's, re-checked against the file in force so that a
  /// reload removing the user ends the tunnel's service. Fail closed: the
  /// only way on without a verified credential is a listener without `proxyAuth`.
  mutating func authorize(_ head: HTTPRequestHead, _ authenticator: ProxyAuthenticator) -> Bool {
    if tunnel != nil {
      guard let refusal = authenticator.inheritanceRefusal(credential) else { return true }
      fail(ProxyFailure(refusal), request: head)
      return false
    }
    let field = head.headers.firstValueBytes("Proxy-Authorization")
    if let field, let verifiedField, let credential, PasswordHash.constantTimeEqual(field, verifiedField),
      authenticator.stillAccepts(credential)
    {
      return true
    }
    verifiedField = nil
    switch authenticator.check(field.map { String(decoding: $0, as: UTF8.self) }, client: client) {
    case .allowed(let verified):
      credential = verified
      verifiedField = field
      return true
    case .refused(let refusal):
      fail(ProxyFailure(refusal), request: head)
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
    switch decision {
    case .allowed(let verified):
      // A reload while the hash was computed governs: the file now in force decides.
      if let authenticator = router.authenticator, !authenticator.stillAccepts(verified) {
        return fail(
          ProxyFailure(authenticator.required("the user name or password is not right")), request: head)
      }
      if let refusal = router.refusal { return fail(refusal, request: head) }
      credential = verified
      verifiedField = head.headers.firstValueBytes("Proxy-Authorization")
      state = .awaitingRequest
      dispatch(head)
      process()
    case .refused(let refusal):
      fail(ProxyFailure(refusal), request: head)
    case .verify:
      fail(
        ProxyFailure(status: 500, code: .proxyAuthRequired, reason: "credential check did not conclude"),
        request: head)
    }
  }
}
