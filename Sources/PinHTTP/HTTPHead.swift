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
    if text.hasPrefix("/") { return .origin(text) }
    guard let schemeEnd = text.firstRange(of: "://") else { return nil }
    let scheme = text[..<schemeEnd.lowerBound].lowercased()
    guard scheme == "http" || scheme == "https" else { return nil }
    let rest = text[schemeEnd.upperBound...]
    let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
    let authority = rest[..<pathStart]
    guard !authority.contains("@"), let (host, port) = splitAuthority(authority) else { return nil }
    var path = String(rest[pathStart...])
    if path.isEmpty { path = "/" } else if path.hasPrefix("?") { path = "/" + path }
    return .absolute(scheme: scheme, host: host, port: port, path: path)
  }

  /// `host[:port]` or `[v6][:port]`; the port, when present, must be 1–65535.
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
    } else if let colon = text.lastIndex(of: ":") {
      host = text[..<colon]
      portText = text[text.index(after: colon)...]
    } else {
      host = text
    }
    guard !host.isEmpty else { return nil }
    guard let portText else { return (String(host), nil) }
    guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy(\.isASCII), let port = Int(portText),
      (1...65535).contains(port)
    else { return nil }
    return (String(host), port)
  }
}

public struct HTTPRequestHead: Sendable, Equatable {
  public var method: String
  public var target: RequestTarget
  /// The target exactly as sent, for logs.
  public var rawTarget: String
  public var version: HTTPVersion
  public var headers: HTTPHeaders

  public init(
    method: String, target: RequestTarget, rawTarget: String, version: HTTPVersion, headers: HTTPHeaders
  ) {
    self.method = method
    self.target = target
    self.rawTarget = rawTarget
    self.version = version
    self.headers = headers
  }

  /// Whether the client wants the connection kept open after this exchange.
  public var keepAlive: Bool { headers.keepsAlive(version) }
}

public struct HTTPResponseHead: Sendable, Equatable {
  public var version: HTTPVersion
  public var status: Int
  public var reason: String
  public var headers: HTTPHeaders

  public init(
    version: HTTPVersion = .http11, status: Int, reason: String, headers: HTTPHeaders = HTTPHeaders()
  ) {
    self.version = version
    self.status = status
    self.reason = reason
    self.headers = headers
  }

  public var keepAlive: Bool { headers.keepsAlive(version) }
}

extension HTTPHeaders {
  /// RFC 9112 §9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with `keep-alive`.
  func keepsAlive(_ version: HTTPVersion) -> Bool {
    let connection = tokens("Connection")
    if connection.contains("close") { return false }
    return version == .http11 || connection.contains("keep-alive")
  }
}
