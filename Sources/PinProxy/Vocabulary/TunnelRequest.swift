import PinHTTP
import PinTrust

/// A tunnel asked for without an HTTP head: a SOCKS5 CONNECT, its wire
/// format decoded by `SocksHandshake`. The forward machine routes,
/// authorizes and logs it as the CONNECT it stands for
/// (`ForwardMachine.openTunnel`); nothing of it is turned back into text
/// to be parsed again.
struct TunnelRequest {
  let host: TrustHost
  let port: Int
  /// The credential the handshake verified (RFC 1929); nil when the
  /// listener asked for none.
  let credential: VerifiedCredential?
  /// What the client sent after its request, before the reply: the start
  /// of the tunnel's bytes.
  let early: [UInt8]

  /// The CONNECT head this request stands for, as the access line and a
  /// refusal page describe it (`CONNECT host:port`, no fields).
  var head: HTTPRequestHead {
    // `TrustHost.description` writes an IPv6 address in brackets already.
    let authority = "\(host):\(port)"
    return HTTPRequestHead(
      method: "CONNECT", target: .authority(host: host.description, port: port), rawTarget: authority,
      version: .http11, headers: HTTPHeaders())
  }
}
