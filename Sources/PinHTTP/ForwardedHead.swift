/// The heads a proxy sends on: hop-by-hop fields removed (RFC 9110 §7.6.1)
/// and the body framing written from the parser's decision (`BodyFraming`),
/// never from whichever framing fields survive the removal.
///
/// Why both: a `Connection` header may name any field as hop-by-hop. Had
/// `Connection: Content-Length` removed the length while the body was still
/// relayed, the origin would have read the body as a second request on a
/// pooled connection (request smuggling) and the pool would have answered
/// later clients with each other's responses. So framing and routing fields
/// can never be named away — such a token is ignored — and the framing fields
/// are always dropped and written anew.
public enum ForwardedHead {
  /// Fields a `Connection` token may not remove: framing and routing.
  static let protected = HeaderNameSet(["content-length", "transfer-encoding", "host"])

  /// Always connection-specific.
  static let hopByHopNames = [
    "connection", "proxy-connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
  ]
  /// What a request drops: hop-by-hop fields, the framing it gets anew, the
  /// Host it gets anew, and Proxy-Authorization (meant for this proxy).
  static let droppedFromRequests = HeaderNameSet(
    hopByHopNames + ["content-length", "host", "proxy-authorization"])
  /// What a response drops: hop-by-hop fields, the framing it gets anew, and
  /// Proxy-Authenticate (this proxy's own challenge, never the origin's).
  static let droppedFromResponses = HeaderNameSet(
    hopByHopNames + ["content-length", "proxy-authenticate"])

  /// Fields a trailer section may not carry on (RFC 9110 §6.5.1): framing,
  /// routing, request modifiers, authentication, response control and
  /// content format. A recipient could otherwise merge them into the head.
  static let prohibitedInTrailers = HeaderNameSet([
    "content-length", "transfer-encoding", "host", "connection", "proxy-connection", "keep-alive", "te",
    "trailer", "upgrade", "authorization", "proxy-authorization", "www-authenticate", "proxy-authenticate",
    "cookie", "set-cookie", "content-type", "content-encoding", "content-range", "content-location",
    "cache-control", "expect", "max-forwards", "range", "if-match", "if-none-match", "if-modified-since",
    "if-unmodified-since", "if-range", "age", "expires", "date", "location", "retry-after", "vary",
  ])

  /// The request head for the upstream: `target` in origin-form, `authority`
  /// as the only Host, the client's fields less hop-by-hop ones and
  /// Proxy-Authorization (meant for this proxy), framing from `head.framing`.
  public static func request(_ head: HTTPRequestHead, target: String, authority: String, via: String)
    -> [UInt8]
  {
    var headers = HTTPHeaders()
    headers.add("Host", authority)
    for field in endToEnd(head.headers, dropping: droppedFromRequests) {
      headers.add(field)
    }
    switch head.framing {
    case .length(let length): headers.add("Content-Length", String(length))
    case .chunked: headers.add("Transfer-Encoding", "chunked")
    case .none, .untilClose: break
    }
    headers.add("Via", via)
    return HTTPSerializer.requestHead(method: head.method, target: target, headers: headers)
  }

  /// How a response body is sent to the client.
  public enum ClientFraming: Sendable, Equatable {
    case none
    case length(Int)
    case chunked
    /// Close-delimited: for an HTTP/1.0 client when the length is unknown.
    case untilClose
  }

  /// The response head for the client, and how its body must be framed.
  /// A body of known length keeps it; an unknown length (chunked or
  /// close-delimited upstream) is chunked to HTTP/1.1 clients and
  /// close-delimited to HTTP/1.0 ones. `closing` adds `Connection: close`.
  public static func response(
    _ head: HTTPResponseHead, clientVersion: HTTPVersion, closing: Bool, via: String
  ) -> (head: [UInt8], framing: ClientFraming) {
    var headers = HTTPHeaders()
    for field in endToEnd(head.headers, dropping: droppedFromResponses) { headers.add(field) }
    let framing: ClientFraming
    switch head.framing {
    case .length(let length):
      framing = .length(length)
      headers.add("Content-Length", String(length))
    case .chunked, .untilClose:
      framing = clientVersion == .http11 ? .chunked : .untilClose
      if framing == .chunked { headers.add("Transfer-Encoding", "chunked") }
    case .none:
      framing = .none
      // HEAD and 304 may state the length the body would have had (RFC 9110
      // §8.6); it is passed on normalised, and only when it is one valid value.
      if head.status != 204 && !(100..<200).contains(head.status),
        head.headers.contains("Content-Length"),
        let length = try? HTTP1Framing.contentLength(head.headers)
      {
        headers.add("Content-Length", String(length))
      }
    }
    if closing || framing == .untilClose { headers.add("Connection", "close") }
    headers.add("Via", via)
    let bytes = HTTPSerializer.responseHead(
      HTTPResponseHead(status: head.status, reason: head.reason, headers: headers))
    return (bytes, framing)
  }

  /// The request fields `request` passes on, without the Host and framing
  /// it writes anew: for a head sent in another HTTP version.
  public static func endToEndFields(of head: HTTPRequestHead) -> HTTPHeaders {
    endToEnd(head.headers, dropping: droppedFromRequests)
  }

  /// The response fields `response` passes on, without the framing.
  public static func endToEndFields(of head: HTTPResponseHead) -> HTTPHeaders {
    endToEnd(head.headers, dropping: droppedFromResponses)
  }

  /// The trailer fields that may be passed on.
  public static func trailers(_ trailers: HTTPHeaders) -> HTTPHeaders {
    var kept = trailers
    kept.filter { field in !prohibitedInTrailers.contains(field.nameBytes) }
    return kept
  }

  /// The fields that are not hop-by-hop: the fixed list, the framing fields,
  /// and whatever `Connection`/`Proxy-Connection` name — except the
  /// protected framing and routing fields, whose tokens are ignored. Names
  /// are compared as bytes, without building a string per field.
  static func endToEnd(_ headers: HTTPHeaders, dropping fixed: HeaderNameSet) -> HTTPHeaders {
    var named = fixed
    let tokens = headers.tokens("Connection") + headers.tokens("Proxy-Connection")
    if !tokens.isEmpty { named.insert(contentsOf: tokens.filter { !protected.contains($0) }) }
    var kept = headers
    kept.filter { field in !named.contains(field.nameBytes) }
    return kept
  }
}
