public enum HTTPVersion: String, Sendable, Equatable {
  case http10 = "HTTP/1.0"
  case http11 = "HTTP/1.1"
}

/// The request target, in the four forms of RFC 9112 §3.2.
public enum RequestTarget: Sendable, Equatable {
  /// `/path?query`
  case origin(String)
  /// `http://host:port/path?query`; `port` is nil when the URL names none.
  case absolute(scheme: String, host: String, port: Int?, path: String)
  /// `host:port`, CONNECT only.
  case authority(host: String, port: Int)
  /// `*`, OPTIONS only.
  case asterisk

  /// Parses a target; nil when it fits none of the forms. Userinfo in an
  /// absolute URL is refused (RFC 9110 §4.2.4: a sender must not generate it,
  /// and it is a classic way to disguise the real host).
  public static func parse(_ text: String, method: String) -> RequestTarget? {
    if method == "CONNECT" {
      guard let (host, port) = splitAuthority(Substring(text)), let port else { return nil }
      return .authority(host: host, port: port)
    }
    if text == "*" { return method == "OPTIONS" ? .asterisk : nil }
    // A fragment is the client's business (RFC 9110 §4.2.5): it is never sent on.
    let text = text.utf8.firstIndex(of: UInt8(ascii: "#")).map { String(text[..<$0]) } ?? text
    let bytes = text.utf8
    if bytes.first == UInt8(ascii: "/") { return .origin(text) }
    // `scheme://`: a scheme holds no colon, so the first one must start "://".
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
      bytes[colon...].starts(with: "://".utf8)
    else { return nil }
    let scheme: String
    if ASCII.equalsIgnoringCase(httpScheme, bytes[..<colon]) {
      scheme = "http"
    } else if ASCII.equalsIgnoringCase(httpsScheme, bytes[..<colon]) {
      scheme = "https"
    } else {
      return nil
    }
    let rest = text[bytes.index(colon, offsetBy: 3)...]
    let pathStart =
      rest.utf8.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
    let authority = rest[..<pathStart]
    guard !authority.utf8.contains(UInt8(ascii: "@")), let (host, port) = splitAuthority(authority) else {
      return nil
    }
    var path = String(rest[pathStart...])
    if path.isEmpty { path = "/" } else if path.utf8.first == UInt8(ascii: "?") { path = "/" + path }
    return .absolute(scheme: scheme, host: host, port: port, path: path)
  }

  private static let httpScheme = Array("http".utf8)
  private static let httpsScheme = Array("https".utf8)

  /// `host[:port]` or `[v6][:port]`; the port, when present, must be 1–65535
  /// written as plain digits (`+443` is not a port). A host with a colon must
  /// be bracketed: `::1:443` would be ambiguous.
  static func splitAuthority(_ text: Substring) -> (String, Int?)? {
    guard !text.isEmpty else { return nil }
    var host: Substring
    var portText: Substring?
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]") else { return nil }
      host = text[...close]
      let after = text[text.index(after: close)...]
      if !after.isEmpty {
        guard after.hasPrefix(":") else { return nil }
        portText = after.dropFirst()
      }
    } else if let colon = text.firstIndex(of: ":") {
      host = text[..<colon]
      portText = text[text.index(after: colon)...]
    } else {
      host = text
    }
    guard !host.isEmpty, host.utf8.allSatisfy(isAuthorityHostByte) else { return nil }
    guard let portText else { return (String(host), nil) }
    guard !portText.isEmpty, portText.count <= 5, portText.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
      let port = Int(portText),
      (1...65535).contains(port)
    else { return nil }
    return (String(host), port)
  }
}

/// How a message's body is delimited (RFC 9112 §6.3): decided once, by the
/// parser, from the head as received. Whatever is forwarded is re-framed from
/// this value, never from the header fields that survive a transformation.
public enum BodyFraming: Sendable, Equatable {
  case none
  case length(Int)
  case chunked
  /// A response read until the connection closes.
  case untilClose
}

/// RFC 3986 §3.2.2 reg-name and IP-literal characters (brackets included).
func isAuthorityHostByte(_ byte: UInt8) -> Bool {
  switch byte {
  case 0x30...0x39, 0x41...0x5a, 0x61...0x7a: return true
  case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "%"),
    UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
    UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
    UInt8(ascii: "="), UInt8(ascii: "["), UInt8(ascii: "]"), UInt8(ascii: ":"):
    return true
  default: return false
  }
}

public struct HTTPRequestHead: Sendable, Equatable {
  public var method: String
  public var target: RequestTarget
  /// The target exactly as sent, for logs.
  public var rawTarget: String
  public var version: HTTPVersion
  public var headers: HTTPHeaders
  /// The parser's framing decision (`.none` until a parser sets it).
  public var framing: BodyFraming

  public init(
    method: String, target: RequestTarget, rawTarget: String, version: HTTPVersion, headers: HTTPHeaders,
    framing: BodyFraming = .none
  ) {
    self.method = method
    self.target = target
    self.rawTarget = rawTarget
    self.version = version
    self.headers = headers
    self.framing = framing
  }

  /// Whether the connection may carry another request after this exchange.
  public var keepAlive: Bool { headers.keepsAlive(version) }
}

public struct HTTPResponseHead: Sendable, Equatable {
  public var version: HTTPVersion
  public var status: Int
  public var reason: String
  public var headers: HTTPHeaders
  /// The parser's framing decision (`.none` until a parser sets it).
  public var framing: BodyFraming

  public init(
    version: HTTPVersion = .http11, status: Int, reason: String, headers: HTTPHeaders = HTTPHeaders(),
    framing: BodyFraming = .none
  ) {
    self.version = version
    self.status = status
    self.reason = reason
    self.headers = headers
    self.framing = framing
  }

  public var keepAlive: Bool { headers.keepsAlive(version) }
}

extension HTTPHeaders {
  /// RFC 9112 §9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with
  /// `keep-alive`, and never after a Transfer-Encoding, whose framing an
  /// HTTP/1.0 peer may not share (RFC 9112 §6.1).
  func keepsAlive(_ version: HTTPVersion) -> Bool {
    if version == .http10 && contains("Transfer-Encoding") { return false }
    if containsToken("Connection", "close") { return false }
    return version == .http11 || containsToken("Connection", "keep-alive")
  }
}
