import PinHTTP
import PinTrust

/// Asking a parent proxy for a tunnel to `host:port`, without I/O: an HTTP
/// parent is sent a CONNECT (RFC 9110 §9.3.6, Basic credentials per RFC
/// 7617), a SOCKS5 parent a greeting, its username/password exchange (RFC
/// 1929) and a CONNECT request (RFC 1928) naming the host by name, so the
/// parent resolves it. Bytes go in (`received`), what to send and the
/// outcome come out; the dialer carries them out on the parent's socket and
/// then runs pinproxy's own TLS handshake and trust decision inside the
/// tunnel, exactly as on a direct socket.
///
/// The parent is as hostile as any peer: its answer is parsed by the
/// project's HTTP/1.1 parser (framing decided there) or read field by field
/// with every length checked, and nothing beyond a bounded answer is kept.
struct ParentTunnel {
  typealias Kind = ParentProxy.Kind
  typealias Credentials = ParentProxy.Credentials

  enum Step: Equatable {
    /// Send these bytes to the parent (then wait for its answer).
    case send([UInt8])
    /// Nothing to do until more bytes arrive.
    case wait
    /// The tunnel is open; `leftover` came after the parent's answer and
    /// belongs to the tunnel.
    case established(leftover: [UInt8])
    /// The parent answered and said no: its status line, or what the SOCKS5
    /// reply code means.
    case refused(String)
    /// The parent's answer is not one the protocol allows.
    case malformed(String)
  }

  private enum Phase {
    case start
    case httpAnswer(HTTP1Parser)
    case socksMethod
    case socksAuthentication
    case socksReply
    case done
  }

  let kind: Kind
  let host: String
  let port: Int
  let credentials: Credentials?
  private var phase = Phase.start
  /// A SOCKS5 answer read so far (at most one reply: 4 + 1 + 255 + 2 bytes).
  private var pending: [UInt8] = []

  /// The longest SOCKS5 reply (a domain-name address of 255 bytes).
  static let maxSocksReply = 4 + 1 + 255 + 2

  init(kind: Kind, host: String, port: Int, credentials: Credentials?) {
    self.kind = kind
    self.host = host
    self.port = port
    self.credentials = credentials
  }

  /// The first bytes to send.
  mutating func start() -> Step {
    guard case .start = phase else { return .wait }
    switch kind {
    case .http:
      var parser = HTTP1Parser(role: .response, limits: HTTPLimits(maxHeaderBytes: 16 * 1024))
      parser.expectResponse(to: "CONNECT")
      phase = .httpAnswer(parser)
      return .send(connectRequest())
    case .socks5:
      phase = .socksMethod
      // No authentication, or (only when there are credentials) username/password.
      return .send(credentials == nil ? [5, 1, 0] : [5, 1, 2])
    }
  }

  /// `CONNECT host:port`: the authority as the client named it, brackets
  /// around an IPv6 literal.
  private func connectRequest() -> [UInt8] {
    let authority = (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    var text = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
    if let credentials {
      let pair = credentials.user + [UInt8(ascii: ":")] + credentials.password
      text += "Proxy-Authorization: Basic \(Base64.encode(pair))\r\n"
    }
    return Array((text + "\r\n").utf8)
  }

  /// Bytes from the parent.
  mutating func received(_ bytes: UnsafeRawBufferPointer) -> Step {
    switch phase {
    case .start, .done:
      return .wait
    case .httpAnswer(var parser):
      phase = .done
      return httpAnswer(&parser, bytes)
    case .socksMethod, .socksAuthentication, .socksReply:
      pending.append(contentsOf: bytes)
      return socksAnswer()
    }
  }

  private mutating func httpAnswer(_ parser: inout HTTP1Parser, _ bytes: UnsafeRawBufferPointer) -> Step {
    let events: [HTTP1Parser.Event]
    do {
      events = try parser.feed(bytes)
    } catch {
      return .malformed("its answer to CONNECT is not HTTP/1.1: \(error.reason)")
    }
    for case .response(let head) in events where !(100..<200).contains(head.status) {
      guard (200..<300).contains(head.status) else {
        return .refused(PrintableText.escaped(String("\(head.status) \(head.reason)".prefix(200))))
      }
      return .established(leftover: parser.takeLeftover())
    }
    phase = .httpAnswer(parser)
    return .wait
  }

  private mutating func socksAnswer() -> Step {
    switch phase {
    case .socksMethod:
      guard pending.count >= 2 else { return .wait }
      guard pending[0] == 5 else { return .malformed("it does not speak SOCKS5") }
      let method = pending[1]
      guard pending.count == 2 else { return .malformed("it sent more than its method choice") }
      pending.removeAll()
      switch method {
      case 0:
        phase = .socksReply
        return requestOrFail()
      case 2 where credentials != nil:
        phase = .socksAuthentication
        return authentication()
      case 0xFF:
        return .refused(
          credentials == nil
            ? "no acceptable authentication method (it wants credentials)"
            : "no acceptable authentication method")
      default:
        return .malformed("it chose authentication method \(method), which was not offered")
      }
    case .socksAuthentication:
      guard pending.count >= 2 else { return .wait }
      guard pending[0] == 1, pending.count == 2 else { return .malformed("a bad username/password reply") }
      guard pending[1] == 0 else { return .refused("the username and password were refused") }
      pending.removeAll()
      phase = .socksReply
      return requestOrFail()
    case .socksReply:
      return socksReply()
    default:
      return .wait
    }
  }

  private func authentication() -> Step {
    guard let credentials, (1...255).contains(credentials.user.count),
      (1...255).contains(credentials.password.count)
    else { return .malformed("a SOCKS5 username and password are 1 to 255 bytes each") }
    return .send(
      [1, UInt8(credentials.user.count)] + credentials.user + [UInt8(credentials.password.count)]
        + credentials.password)
  }

  /// `05 01 00 ATYP ADDR PORT`: an IP literal as its bytes, a name as a name.
  private func requestOrFail() -> Step {
    var request: [UInt8] = [5, 1, 0]
    if let address = IPAddress(host) {
      // A literal (strictly parsed: no leading zeros) goes as its bytes.
      request += [address.isIPv6 ? 4 : 1] + address.bytes
    } else {
      let name = Array(host.utf8)
      guard (1...255).contains(name.count) else {
        return .malformed("the host name is longer than SOCKS5 carries")
      }
      request += [3, UInt8(name.count)] + name
    }
    request += [UInt8(port >> 8), UInt8(port & 0xFF)]
    return .send(request)
  }

  private mutating func socksReply() -> Step {
    guard pending.count >= 5 else { return .wait }
    guard pending[0] == 5, pending[2] == 0 else { return .malformed("a bad SOCKS5 reply") }
    let addressLength: Int
    switch pending[3] {
    case 1: addressLength = 4
    case 4: addressLength = 16
    case 3: addressLength = 1 + Int(pending[4])
    default: return .malformed("a SOCKS5 reply with address type \(pending[3])")
    }
    let length = 4 + addressLength + 2
    guard pending[1] == 0 else {
      phase = .done
      return .refused(Self.replyMeaning(pending[1]))
    }
    guard pending.count >= length else { return .wait }
    phase = .done
    let leftover = Array(pending[length...])
    pending = []
    return .established(leftover: leftover)
  }

  /// RFC 1928 §6's reply codes.
  static func replyMeaning(_ code: UInt8) -> String {
    switch code {
    case 1: return "SOCKS5 reply 1: general failure"
    case 2: return "SOCKS5 reply 2: connection not allowed by ruleset"
    case 3: return "SOCKS5 reply 3: network unreachable"
    case 4: return "SOCKS5 reply 4: host unreachable"
    case 5: return "SOCKS5 reply 5: connection refused"
    case 6: return "SOCKS5 reply 6: TTL expired"
    case 7: return "SOCKS5 reply 7: command not supported"
    case 8: return "SOCKS5 reply 8: address type not supported"
    default: return "SOCKS5 reply \(code)"
    }
  }
}
