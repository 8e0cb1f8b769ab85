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
    target.withUnsafeBufferPointer { parse(bytes: $0, method: method) }
  }

  /// The same over a buffer: every scan is a loop over its bytes, with no
  /// slice re-checked or re-based per step (every request's target).
  static func parse(bytes target: UnsafeBufferPointer<UInt8>, method: String) -> RequestTarget? {
    if method == "CONNECT" {
      guard let (host, port) = authorityParts(target), let port else { return nil }
      return .authority(host: text(target, host), port: port)
    }
    if target.count == 1 && target[0] == UInt8(ascii: "*") { return method == "OPTIONS" ? .asterisk : nil }
    // A fragment is the client's business (RFC 9110 §4.2.5): it is never sent on.
    let bytes = UnsafeBufferPointer(
      rebasing: target[..<(target.firstIndex(of: UInt8(ascii: "#")) ?? target.count)])
    if bytes.first == UInt8(ascii: "/") { return .origin(text(bytes, 0..<bytes.count)) }
    // `scheme://`: a scheme holds no colon, so the first one must start "://".
    guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), colon + 3 <= bytes.count,
      bytes[colon + 1] == UInt8(ascii: "/"), bytes[colon + 2] == UInt8(ascii: "/")
    else { return nil }
    let scheme: String
    if isScheme(bytes, colon, "http") {
      scheme = "http"
    } else if isScheme(bytes, colon, "https") {
      scheme = "https"
    } else {
      return nil
    }
    let authorityStart = colon + 3
    var pathStart = authorityStart
    while pathStart < bytes.count && bytes[pathStart] != UInt8(ascii: "/")
      && bytes[pathStart] != UInt8(ascii: "?")
    {
      pathStart += 1
    }
    let authority = UnsafeBufferPointer(rebasing: bytes[authorityStart..<pathStart])
    guard !authority.contains(UInt8(ascii: "@")), let (host, port) = authorityParts(authority) else {
      return nil
    }
    let path: String
    if pathStart == bytes.count {
      path = "/"
    } else if bytes[pathStart] == UInt8(ascii: "?") {
      path = "/" + text(bytes, pathStart..<bytes.count)
    } else {
      path = text(bytes, pathStart..<bytes.count)
    }
    return .absolute(scheme: scheme, host: text(authority, host), port: port, path: path)
  }

  private static func text(_ bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    String(decoding: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self)
  }

  /// Whether `bytes[..<colon]` is `name` in any case (`name`: lowercase letters).
  private static func isScheme(_ bytes: UnsafeBufferPointer<UInt8>, _ colon: Int, _ name: StaticString)
    -> Bool
  {
    guard colon == name.utf8CodeUnitCount else { return false }
    let letters = name.utf8Start
    for index in 0..<colon where bytes[index] | 0x20 != letters[index] { return false }
    return true
  }

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
    let base = bytes.startIndex
    guard let (host, port) = bytes.withUnsafeBufferPointer({ authorityParts($0) }) else { return nil }
    return ((base + host.lowerBound)..<(base + host.upperBound), port)
  }

  /// The same over a buffer, the host's range counted from its start.
  static func authorityParts(_ bytes: UnsafeBufferPointer<UInt8>) -> (host: Range<Int>, port: Int?)? {
    let count = bytes.count
    guard count > 0 else { return nil }
    var hostEnd = count
    var portStart: Int?
    if bytes[0] == UInt8(ascii: "[") {
      guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
      hostEnd = close + 1
      if hostEnd < count {
        guard bytes[hostEnd] == UInt8(ascii: ":") else { return nil }
        portStart = hostEnd + 1
      }
    } else {
      // One pass to the first colon, checking the host's bytes on the way:
      // eight a step while they are letters, digits, `-` or `.` (nearly
      // every name), then a byte at a time.
      var index = 0
      if let start = bytes.baseAddress {
        let raw = UnsafeRawBufferPointer(start: start, count: count)
        while index + 8 <= count {
          let plain = plainHostBytes(ByteWord.load(raw, index))
          index += plain
          if plain < 8 { break }
        }
      }
      while index < count && bytes[index] != UInt8(ascii: ":") {
        guard isAuthorityHostByte(bytes[index]) else { return nil }
        index += 1
      }
      hostEnd = index
      if index < count { portStart = index + 1 }
    }
    guard hostEnd > 0 else { return nil }
    if bytes[0] == UInt8(ascii: "[") {
      for index in 0..<hostEnd where !isAuthorityHostByte(bytes[index]) { return nil }
    }
    guard let portStart else { return (0..<hostEnd, nil) }
    guard portStart < count, count - portStart <= 5 else { return nil }
    var port = 0
    for index in portStart..<count {
      let byte = bytes[index]
      guard byte >= 0x30 && byte <= 0x39 else { return nil }
      port = port * 10 + Int(byte - 0x30)
    }
    guard (1...65535).contains(port) else { return nil }
    return (0..<hostEnd, port)
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

/// How many of `word`'s bytes, from the first, are ASCII letters, digits,
/// `-` or `.` (8: all): every one an authority host byte. Exact per byte
/// (`ByteWord.above` over the word with its high bits set aside).
@inline(__always)
func plainHostBytes(_ word: UInt64) -> Int {
  let low = word & ~ByteWord.highs
  let marks = ByteWord.alphanumerics(low) | ByteWord.exactly(low, 0x2d) | ByteWord.exactly(low, 0x2e)
  let plain = marks & ~(word & ByteWord.highs)
  return ByteWord.first(~plain & ByteWord.highs)
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
