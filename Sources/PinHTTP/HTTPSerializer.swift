/// Writes HTTP/1.1 message heads and chunked framing.
public enum HTTPSerializer {
  public static func requestHead(method: String, target: String, headers: HTTPHeaders) -> [UInt8] {
    var text = "\(method) \(target) HTTP/1.1\r\n"
    for field in headers { text += "\(field.name): \(field.value)\r\n" }
    text += "\r\n"
    return Array(text.utf8)
  }

  public static func responseHead(_ head: HTTPResponseHead) -> [UInt8] {
    var text = "HTTP/1.1 \(head.status) \(head.reason)\r\n"
    for field in head.headers { text += "\(field.name): \(field.value)\r\n" }
    text += "\r\n"
    return Array(text.utf8)
  }

  /// One chunk; empty input writes nothing (an empty chunk would end the body).
  public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
    guard !bytes.isEmpty else { return [] }
    return Array((String(bytes.count, radix: 16) + "\r\n").utf8) + bytes + [0x0d, 0x0a]
  }

  public static func lastChunk(trailers: HTTPHeaders = HTTPHeaders()) -> [UInt8] {
    var text = "0\r\n"
    for field in trailers { text += "\(field.name): \(field.value)\r\n" }
    text += "\r\n"
    return Array(text.utf8)
  }
}

/// Hop-by-hop fields (RFC 9110 §7.6.1) apply to one connection and are never
/// forwarded: Connection and every field it names, and the fixed list below.
public enum HopByHop {
  static let fixed = [
    "Connection", "Proxy-Connection", "Keep-Alive", "TE", "Trailer", "Transfer-Encoding", "Upgrade",
  ]

  /// The request fields to send upstream. Proxy-Authorization is for this
  /// proxy, never for the origin.
  public static func requestHeaders(_ headers: HTTPHeaders) -> HTTPHeaders {
    strip(headers, extra: ["Proxy-Authorization"])
  }

  /// The response fields to send to the client.
  public static func responseHeaders(_ headers: HTTPHeaders) -> HTTPHeaders {
    strip(headers, extra: ["Proxy-Authenticate"])
  }

  static func strip(_ headers: HTTPHeaders, extra: [String]) -> HTTPHeaders {
    var result = headers
    for name in headers.tokens("Connection") + headers.tokens("Proxy-Connection") { result.remove(name) }
    for name in fixed + extra { result.remove(name) }
    return result
  }
}
