import PinHTTP

/// The request an upstream link sends: the client's head, the origin-form
/// target and the authority (Host or `:authority`).
///
/// A value made where the head is sent (`ExchangeMachine.forwardedRequest`)
/// and lent to the link for that call: no action carries it, and making it
/// allocates nothing.
struct ForwardedRequest {
  let head: HTTPRequestHead
  let path: String
  let authority: String
  /// The `Via` entry this hop adds: the protocol it received the request in.
  let via: String

  init(head: HTTPRequestHead, path: String, authority: String, via: String = ForwardedRequest.via(.http1)) {
    self.head = head
    self.path = path
    self.authority = authority
    self.via = via
  }

  /// RFC 9110 §7.6.3: `received-protocol` names the version the message
  /// came in, so HTTP/2 is `2`.
  static func via(_ received: WireProtocol) -> String {
    received == .http2 ? "2 pinproxy" : "1.1 pinproxy"
  }
}
