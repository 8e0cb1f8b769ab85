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
    parse(Array(text.utf8)[...], method: method)
  }

  /// The same over the request line's own bytes: the parts are found in
  /// place and only the host and path become Strings (short ones stay
  /// inline in the String, allocating nothing).
  static func parse(_ target: ArraySlice<UInt8>, method: String) -> RequestTarget? {
    if method == "CONNECT" {
      guard let (host, port) = authorityParts(target), let port else { return nil }
      return .authority(host: String(decoding: target[host], as: UTF8.self), port: port)
    }
    if target.count == 1 && target.first == UInt8(ascii: "*") { return method == "OPTIONS" ? .asterisk : nil }
    // A fragment is the client's business (RFC 9110 §4.2.5): it is never sent on.
    let bytes = target[..<(target.firstIndex(of: UInt8(ascii: "#")) ?? target.endIndex)]
    if bytes.first == UInt8(ascii: "/") { return .origin(String(decoding: bytes, as: UTF8.self)) }
    // `scheme://`: a scheme holds no colon, so the first one must start "://".
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 3 <= bytes.endIndex,
      bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
    else { return nil }
    let scheme: String
    if ASCII.equalsIgnoringCase(httpScheme, bytes[..<colon]) {
      scheme = "http"
    } else if ASCII.equalsIgnoringCase(httpsScheme, bytes[..<colon]) {
      scheme = "https"
    } else {
      return nil
    }
    let rest = bytes[(colon + 3)...]
    let pathStart =
      rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
    let authority = rest[..<pathStart]
    guard !authority.contains(UInt8(ascii: "@")), let (host, port) = authorityParts(authority) else {
      return nil
    }
    let pathBytes = rest[pathStart...]
    let path: String
    if pathBytes.isEmpty {
      path = "/"
    } else if pathBytes.first == UInt8(ascii: "?") {
      path = "/" + String(decoding: pathBytes, as: UTF8.self)
    } else {
      path = String(decoding: pathBytes, as: UTF8.self)
    }
    return .absolute(
      scheme: scheme, host: String(decoding: authority[host], as: UTF8.self), port: port, path: path)
  }

  private static let httpScheme = Array("http".utf8)
  private static let httpsScheme = Array("https".utf8)

  /// `host[:port]` or `[v6][:port]`; the port, when present, must be 1–65535
  /// written as plain digits (`+443` is not a port). A host with a colon must
  /// be bracketed: `::1:443` would be ambiguous.
  static func splitAuthority(_ text: Substring) -> (String, Int?)? {
    let bytes = Array(text.utf8)[...]
    guard let (host, port) = authorityParts(bytes) else { return nil }
    return (String(decoding: bytes[host], as: UTF8.self), port)
  }

  /// `splitAuthority` in place: where the host lies in `bytes` (brackets
  /// included) and the port; nil when malformed.
  static func authorityParts(_ bytes: ArraySlice<UInt8>) -> (host: Range<Int>, port: Int?)? {
    guard !bytes.isEmpty else { return nil }
    let hostEnd: Int
    var portStart: Int?
    if bytes.first == UInt8(ascii: "[") {
      guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
      hostEnd = close + 1
      if hostEnd < bytes.endIndex {
        guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
        portStart = hostEnd + 1
      }
    } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
      hostEnd = colon
      portStart = colon + 1
    } else {
      hostEnd = bytes.endIndex
    }
    let host = bytes.startIndex..<hostEnd
    guard !host.isEmpty, bytes[host].withUnsafeBufferPointer({ $0.allSatisfy(isAuthorityHostByte) }) else {
      return nil
    }
    guard let portStart else { return (host, nil) }
    let digits = bytes[portStart...]
    guard !digits.isEmpty, digits.count <= 5, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      return nil
    }
    let port = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    guard (1...65535).contains(port) else { return nil }
    return (host, port)
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

/// RFC 3986 §3.2.2 reg-name and IP-literal characters (brackets
/// included), as bits for bytes 0–63 and 64–127: a shift and a test a
/// byte (the host of every absolute-form request is checked). Held to
/// `isAuthorityHostCharacter` for every byte by AuthorityBitsTests.
@inline(__always)
func isAuthorityHostByte(_ byte: UInt8) -> Bool {
  if byte < 64 { return authorityBitsLow >> UInt64(byte) & 1 != 0 }
  if byte < 128 { return authorityBitsHigh >> UInt64(byte - 64) & 1 != 0 }
  return false
}

let authorityBitsLow: UInt64 = 0x2fff_7ff2_0000_0000
let authorityBitsHigh: UInt64 = 0x47ff_fffe_afff_fffe

/// The same as a list.
func isAuthorityHostCharacter(_ byte: UInt8) -> Bool {
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
  /// The target exactly as sent, for logs: the request line's own bytes
  /// (a slice of the head's storage), made a String only when read.
  public var rawTargetBytes: ArraySlice<UInt8>
  public var rawTarget: String {
    get { String(decoding: rawTargetBytes, as: UTF8.self) }
    set { rawTargetBytes = Array(newValue.utf8)[...] }
  }
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
    self.rawTargetBytes = Array(rawTarget.utf8)[...]
    self.version = version
    self.headers = headers
    self.framing = framing
  }

  /// A parsed head: the target's bytes lie in the head's storage.
  init(
    method: String, target: RequestTarget, rawTargetBytes: ArraySlice<UInt8>, version: HTTPVersion,
    headers: HTTPHeaders
  ) {
    self.method = method
    self.target = target
    self.rawTargetBytes = rawTargetBytes
    self.version = version
    self.headers = headers
    self.framing = .none
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
    if version == .http10 && contains(.transferEncoding) { return false }
    if containsToken(.connection, "close") { return false }
    return version == .http11 || containsToken(.connection, "keep-alive")
  }
}
