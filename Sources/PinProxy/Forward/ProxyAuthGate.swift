import PinHTTP

/// Proxy authentication of one HTTP/1.x client connection (`proxyAuth`),
/// as a value of its own: what the connection has verified, and the verdict
/// for each request head. The forward machine maps a verdict onto its state
/// and actions (a refusal, or waiting while a new credential is hashed off
/// the loop); it keeps no credential of its own.
struct ProxyAuthGate {
  /// The credential last verified on this connection: a CONNECT's holds
  /// for every request inside its tunnel (while the file in force still has
  /// that user with that hash); an absolute-form request's names the user
  /// for its access line only (each such request carries its own).
  private(set) var credential: VerifiedCredential?
  /// The `Proxy-Authorization` value `credential` was verified from: a
  /// keep-alive client sends the same one with every request, and the same
  /// bytes again need no parsing, digest or cache look-up (only the check
  /// that the file in force still has that user with that hash).
  private var verifiedField: [UInt8]?

  enum Verdict {
    case proceed
    case refuse(ProxyFailure)
    /// A credential not seen yet: hashed off the loop, then `checked`.
    case verify(PendingCredential)
  }

  /// The verdict for a request head under `authenticator`, before anything
  /// is routed or dialled. A request outside a tunnel must carry a
  /// credential; one inside an intercepted CONNECT inherits the CONNECT's,
  /// re-checked against the file in force so that a reload removing the
  /// user ends the tunnel's service. Fail closed: `.proceed` only for a
  /// credential verified against the file in force (the only way on without
  /// one is a listener without `proxyAuth`, which never asks the gate).
  mutating func admit(
    _ head: HTTPRequestHead, under authenticator: ProxyAuthenticator, inTunnel: Bool, client: String
  ) -> Verdict {
    if inTunnel {
      guard let refusal = authenticator.inheritanceRefusal(credential) else { return .proceed }
      return .refuse(ProxyFailure(refusal))
    }
    let field = head.headers.firstValueBytes("Proxy-Authorization")
    if let field, let verifiedField, let credential, PasswordHash.constantTimeEqual(field, verifiedField),
      authenticator.stillAccepts(credential)
    {
      return .proceed
    }
    verifiedField = nil
    switch authenticator.check(field.map { String(decoding: $0, as: UTF8.self) }, client: client) {
    case .allowed(let verified):
      (credential, verifiedField) = (verified, field)
      return .proceed
    case .refused(let refusal):
      return .refuse(ProxyFailure(refusal))
    case .verify(let pending):
      return .verify(pending)
    }
  }

  /// A credential verified before the connection reached the machine (a
  /// SOCKS5 client's, RFC 1929, checked during its handshake): nil when
  /// the tunnel may open, and the credential is then this connection's,
  /// inherited by every request inside it; else the refusal. Fail closed:
  /// no credential, or one the file in force no longer has with that hash
  /// (a reload since the check), opens nothing.
  mutating func adopt(_ verified: VerifiedCredential?, under authenticator: ProxyAuthenticator)
    -> ProxyFailure?
  {
    guard let verified, authenticator.stillAccepts(verified) else {
      return ProxyFailure(authenticator.required("the user name or password is not right"))
    }
    credential = verified
    verifiedField = nil
    return nil
  }

  /// The hashed credential's verdict for the head that waited for it: nil
  /// when it may go on (the credential is then this connection's), else the
  /// refusal. A reload while the hash was computed governs: the file now in
  /// force (`authenticator`) decides, and a client the new snapshot shuts
  /// out (`listenerRefusal`) is refused.
  mutating func checked(
    _ decision: ProxyAuthenticator.Decision, for head: HTTPRequestHead,
    under authenticator: ProxyAuthenticator?,
    listenerRefusal: ProxyFailure?
  ) -> ProxyFailure? {
    switch decision {
    case .allowed(let verified):
      if let authenticator, !authenticator.stillAccepts(verified) {
        return ProxyFailure(authenticator.required("the user name or password is not right"))
      }
      if let listenerRefusal { return listenerRefusal }
      credential = verified
      verifiedField = head.headers.firstValueBytes("Proxy-Authorization")
      return nil
    case .refused(let refusal):
      return ProxyFailure(refusal)
    case .verify:
      return ProxyFailure(status: 500, code: .proxyAuthRequired, reason: "credential check did not conclude")
    }
  }
}
