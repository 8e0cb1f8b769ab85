import PinHTTP

/// HTTP/1.1 messages as HTTP/2 header blocks and back (RFC 9113 §8.3),
/// from the framing the HTTP/1.1 parser decided and never from the framing
/// fields themselves: those are connection-specific in HTTP/2 (§8.2.2).
public enum HTTP2Mapping {
  /// The request an HTTP/1.1 client sent, as the header block for an h2
  /// origin: `:authority` replaces Host, `:path` is origin-form, hop-by-hop
  /// fields and everything `Connection` names are gone, `TE` survives only
  /// as `trailers`, and the length is `content-length` when the parser knew
  /// it. Names are lower-cased (§8.2.1); values were checked by the parser.
  public static func request(_ head: HTTPRequestHead, path: String, authority: String, via: String)
    -> [HTTP2Header]
  {
    var block: [HTTP2Header] = []
    // The pseudo-headers, the fields, TE, a length and Via: one allocation.
    block.reserveCapacity(head.headers.count + 7)
    block.append(HTTP2Header(name: Names.method, value: Array(head.method.utf8)))
    block.append(HTTP2Header(name: Names.scheme, value: Names.https))
    block.append(HTTP2Header(name: Names.authority, value: Array(authority.utf8)))
    block.append(HTTP2Header(name: Names.path, value: Array(path.utf8)))
    for field in ForwardedHead.endToEndFields(of: head) {
      block.append(HTTP2Header(name: lowercased(field.nameBytes), value: field.valueBytes))
    }
    if head.headers.tokens("TE").contains("trailers") {
      block.append(HTTP2Header(name: Names.te, value: Names.trailers))
    }
    if case .length(let length) = head.framing {
      block.append(HTTP2Header(name: Names.contentLength, value: Array(String(length).utf8)))
    }
    block.append(HTTP2Header(name: Names.via, value: Array(via.utf8)))
    return block
  }

  /// A response header block from an h2 origin as an HTTP/1.1 head, its
  /// framing decided here once: none for 1xx, 204, 304 and HEAD; the
  /// `content-length` nghttp2 already held the DATA to; otherwise unknown
  /// (the client side re-frames it as chunked). nil for a block without a
  /// valid `:status` (nghttp2 resets such a stream before it gets here).
  public static func response(_ block: [HTTP2Header], requestMethod: String) -> HTTPResponseHead? {
    var status: Int?
    var headers = HTTPHeaders()
    for header in block {
      if header.name == Names.status {
        status = Int(String(decoding: header.value, as: UTF8.self))
      } else if header.name.first != UInt8(ascii: ":") {
        headers.add(HTTPHeaders.Field(nameBytes: header.name, valueBytes: header.value))
      }
    }
    guard let status, (100...599).contains(status) else { return nil }
    let framing: BodyFraming
    if (100..<200).contains(status) || status == 204 || status == 304 || requestMethod == "HEAD" {
      framing = .none
    } else if let length = headers.first("content-length").flatMap({ Int($0) }), length >= 0 {
      framing = .length(length)
    } else {
      framing = .chunked
    }
    return HTTPResponseHead(
      status: status, reason: HTTPStatus.reasonPhrase(status), headers: headers, framing: framing)
  }

  /// Why an h2 request cannot be served as an HTTP/1.1 exchange.
  public enum RequestRefusal: Error, Equatable {
    /// CONNECT (RFC 9113 §8.5) inside HTTP/2: a tunnel in a tunnel is not served.
    case connect
    case malformed(String)
  }

  /// A request header block from an h2 client as the HTTP/1.1 head the
  /// exchange machinery forwards: `:method` and `:path` (origin-form only),
  /// `:authority` as Host, cookies joined into one field (RFC 9113 §8.2.3),
  /// and the framing decided here once: the `content-length` (which nghttp2
  /// holds the DATA to), none when the block ended the stream, else unknown
  /// (chunked towards an HTTP/1.1 origin). nghttp2 has already refused
  /// upper-case names, CR/LF/NUL, connection-specific fields and misplaced
  /// or repeated pseudo-headers (§8.2); what is left is checked here.
  public static func requestHead(_ block: [HTTP2Header], endsStream: Bool) -> Result<
    HTTPRequestHead, RequestRefusal
  > {
    var method: String?
    var path: String?
    var authority: String?
    var scheme: String?
    var headers = HTTPHeaders()
    var cookies: [[UInt8]] = []
    for header in block {
      switch header.name {
      case Names.method: method = String(decoding: header.value, as: UTF8.self)
      case Names.path: path = String(decoding: header.value, as: UTF8.self)
      case Names.authority: authority = String(decoding: header.value, as: UTF8.self)
      case Names.scheme: scheme = String(decoding: header.value, as: UTF8.self)
      case Names.cookie: cookies.append(header.value)
      default:
        guard header.name.first != UInt8(ascii: ":") else {
          return .failure(.malformed("unknown pseudo-header"))
        }
        headers.add(HTTPHeaders.Field(nameBytes: header.name, valueBytes: header.value))
      }
    }
    guard let method else { return .failure(.malformed(":method is missing")) }
    if method == "CONNECT" { return .failure(.connect) }
    guard scheme == "https" else { return .failure(.malformed(":scheme must be https inside the tunnel")) }
    guard let path, path.utf8.first == UInt8(ascii: "/") else {
      return .failure(.malformed(":path must be origin-form (/path)"))
    }
    if !cookies.isEmpty {
      headers.add(
        HTTPHeaders.Field(
          nameBytes: Names.cookie, valueBytes: Array(cookies.joined(separator: Names.cookieSeparator))))
    }
    if let authority { headers.add("host", authority) }
    let framing: BodyFraming
    let lengths = headers.values("content-length")
    if let first = lengths.first {
      guard lengths.allSatisfy({ $0 == first }), !first.isEmpty, first.utf8.count <= 18,
        first.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let length = Int(first)
      else { return .failure(.malformed("content-length is not one number")) }
      framing = .length(length)
    } else {
      framing = endsStream ? .none : .chunked
    }
    headers.remove("content-length")
    return .success(
      HTTPRequestHead(
        method: method, target: .origin(path), rawTarget: path, version: .http11, headers: headers,
        framing: framing))
  }

  /// An HTTP/1.1 response head as the header block for an h2 client:
  /// `:status`, the end-to-end fields lower-cased, and `content-length`
  /// when the framing (or, for a bodiless response, a valid field) gives one.
  public static func responseBlock(_ head: HTTPResponseHead) -> [HTTP2Header] {
    var block: [HTTP2Header] = []
    // Its status, its fields and a length: one allocation, not a growing array.
    block.reserveCapacity(head.headers.count + 2)
    block.append(HTTP2Header(name: Names.status, value: Array(String(head.status).utf8)))
    for field in ForwardedHead.endToEndFields(of: head) {
      block.append(HTTP2Header(name: lowercased(field.nameBytes), value: field.valueBytes))
    }
    switch head.framing {
    case .length(let length):
      block.append(HTTP2Header(name: Names.contentLength, value: Array(String(length).utf8)))
    case .none where head.status != 204 && head.status != 304 && !(100..<200).contains(head.status):
      // HEAD: the length the body would have had, when it is one valid value.
      if let length = head.headers.first("content-length").flatMap({ Int($0) }), length >= 0,
        head.headers.count(of: "content-length") == 1
      {
        block.append(HTTP2Header(name: Names.contentLength, value: Array(String(length).utf8)))
      }
    default:
      break
    }
    return block
  }

  /// A trailer block as fields (pseudo-headers never belong in one).
  public static func trailers(_ block: [HTTP2Header]) -> HTTPHeaders {
    var fields = HTTPHeaders()
    for header in block where header.name.first != UInt8(ascii: ":") {
      fields.add(HTTPHeaders.Field(nameBytes: header.name, valueBytes: header.value))
    }
    return ForwardedHead.trailers(fields)
  }

  /// Trailer fields for an h2 peer: lower-cased, prohibited ones dropped.
  public static func trailerBlock(_ trailers: HTTPHeaders) -> [HTTP2Header] {
    ForwardedHead.trailers(trailers).map { HTTP2Header(name: lowercased($0.nameBytes), value: $0.valueBytes) }
  }

  static func lowercased(_ name: ArraySlice<UInt8>) -> [UInt8] {
    name.map { $0 >= 0x41 && $0 <= 0x5a ? $0 | 0x20 : $0 }
  }

  enum Names {
    static let method = Array(":method".utf8)
    static let scheme = Array(":scheme".utf8)
    static let authority = Array(":authority".utf8)
    static let path = Array(":path".utf8)
    static let status = Array(":status".utf8)
    static let https = Array("https".utf8)
    static let te = Array("te".utf8)
    static let trailers = Array("trailers".utf8)
    static let contentLength = Array("content-length".utf8)
    static let via = Array("via".utf8)
    static let cookie = Array("cookie".utf8)
    static let cookieSeparator = Array("; ".utf8)
  }
}
