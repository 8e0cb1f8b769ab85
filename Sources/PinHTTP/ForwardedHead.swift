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
  static let protected = Dropped.bits(.contentLength, .transferEncoding, .host)

  /// Always connection-specific.
  static let hopByHop: [KnownField] = [
    .connection, .proxyConnection, .keepAlive, .te, .trailer, .transferEncoding, .upgrade,
  ]
  /// What a request drops: hop-by-hop fields, the framing it gets anew, the
  /// Host it gets anew, and Proxy-Authorization (meant for this proxy).
  static let droppedFromRequests = Dropped.bits(hopByHop + [.contentLength, .host, .proxyAuthorization])
  /// What a response drops: hop-by-hop fields, the framing it gets anew, and
  /// Proxy-Authenticate (this proxy's own challenge, never the origin's).
  static let droppedFromResponses = Dropped.bits(hopByHop + [.contentLength, .proxyAuthenticate])

  /// The fields a head does not pass on: known ones by their bits (every
  /// fixed one is known), and whatever other names its `Connection` fields
  /// list that it carries (rare: made only then).
  struct Dropped {
    var known: UInt32
    var named: HeaderNameSet?

    static func bits(_ fields: KnownField...) -> UInt32 { bits(fields) }
    static func bits(_ fields: [KnownField]) -> UInt32 { fields.reduce(0) { $0 | $1.bit } }

    func drops(_ known: UInt8, _ name: UnsafeBufferPointer<UInt8>) -> Bool {
      if known != HTTPHeaders.Entry.unknown { return self.known & (1 &<< UInt32(known)) != 0 }
      return named?.contains(name) ?? false
    }
  }

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
  ///
  /// Written in one pass into one buffer sized up front: the client's fields
  /// are copied from the parsed head, skipping the dropped ones, with no
  /// intermediate list of fields.
  public static func request(_ head: HTTPRequestHead, target: String, authority: String, via: String)
    -> [UInt8]
  {
    var bytes: [UInt8] = []
    appendRequest(head, target: target, authority: authority, via: via, to: &bytes)
    return bytes
  }

  /// The same, appended to `bytes` (a connection's reused buffer), written
  /// into room made once for the whole head.
  public static func appendRequest(
    _ head: HTTPRequestHead, target: String, authority: String, via: String, to bytes: inout [UInt8]
  ) {
    let room =
      head.method.utf8.count + target.utf8.count + authority.utf8.count + via.utf8.count + 96
      + HTTPSerializer.fieldsSize(head.headers)
    bytes.appendWriting(room: room) { out in
      // The fixed text between the parts goes in whole (the request line's
      // end with the Host name; the Via name; the last CRLFs).
      out.put(head.method)
      out.put(0x20)
      out.put(target)
      out.put(" HTTP/1.1\r\nHost: ")
      out.put(authority)
      out.put("\r\n")
      writeEndToEnd(head.headers, dropping: droppedFromRequests, to: &out)
      switch head.framing {
      case .length(let length): writeContentLength(length, to: &out)
      case .chunked: out.put("Transfer-Encoding: chunked\r\n")
      case .none, .untilClose: break
      }
      writeVia(via, to: &out)
    }
  }

  /// The framing field written from the parser's decision.
  private static func writeContentLength(_ length: Int, to out: inout ByteWriter) {
    out.put("Content-Length: ")
    out.putDecimal(length)
    out.put("\r\n")
  }

  /// `Via: …` and the blank line that ends the head.
  private static func writeVia(_ via: String, to out: inout ByteWriter) {
    out.put("Via: ")
    out.put(via)
    out.put("\r\n\r\n")
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
    var bytes: [UInt8] = []
    let framing = appendResponse(head, clientVersion: clientVersion, closing: closing, via: via, to: &bytes)
    return (bytes, framing)
  }

  /// The same, appended to `bytes`, which grows once: by the head and, when
  /// the body's length is known and small, by the body too, so that the body
  /// that usually follows in the same read lands without another allocation.
  public static func appendResponse(
    _ head: HTTPResponseHead, clientVersion: HTTPVersion, closing: Bool, via: String,
    to bytes: inout [UInt8]
  ) -> ClientFraming {
    let room = head.reason.utf8.count + via.utf8.count + 160 + HTTPSerializer.fieldsSize(head.headers)
    var reserve = bytes.count + room
    if case .length(let length) = head.framing, length <= bodyRoom { reserve += length }
    bytes.reserveCapacity(reserve)
    return bytes.appendWriting(room: room) { out -> ClientFraming in
      out.put("HTTP/1.1 ")
      out.putDecimal(head.status)
      out.put(0x20)
      out.put(head.reason)
      out.put("\r\n")
      writeEndToEnd(head.headers, dropping: droppedFromResponses, to: &out)
      let framing: ClientFraming
      switch head.framing {
      case .length(let length):
        framing = .length(length)
        writeContentLength(length, to: &out)
      case .chunked, .untilClose:
        framing = clientVersion == .http11 ? .chunked : .untilClose
        if framing == .chunked { out.put("Transfer-Encoding: chunked\r\n") }
      case .none:
        framing = .none
        // HEAD and 304 may state the length the body would have had (RFC 9110
        // §8.6); it is passed on normalised, and only when it is one valid value.
        if head.status != 204 && !(100..<200).contains(head.status),
          head.headers.contains(.contentLength),
          let length = try? HTTP1Framing.contentLength(head.headers)
        {
          writeContentLength(length, to: &out)
        }
      }
      if closing || framing == .untilClose { out.put("Connection: close\r\n") }
      writeVia(via, to: &out)
      return framing
    }
  }

  /// The largest body `appendResponse` makes room for beside the head.
  static let bodyRoom = 16 * 1024

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
  static func endToEnd(_ headers: HTTPHeaders, dropping fixed: UInt32) -> HTTPHeaders {
    let drop = dropped(headers, fixed: fixed)
    var kept = headers
    kept.keepFields { known, name in !drop.drops(known, name) }
    return kept
  }

  /// `fixed` and what `Connection`/`Proxy-Connection` name (less the
  /// protected names). Most heads have neither field, or only
  /// `Connection: keep-alive` or `close`: then `fixed` alone.
  static func dropped(_ headers: HTTPHeaders, fixed: UInt32) -> Dropped {
    var drop = Dropped(known: fixed, named: nil)
    func add(_ token: UnsafeBufferPointer<UInt8>) {
      if let known = KnownField.recognize(token) {
        if protected & known.bit == 0 { drop.known |= known.bit }
        return
      }
      // Another name matters only if the head carries it (`close` is an
      // option, seldom a field): nothing is made for the usual tokens.
      guard headers.contains(name: token), drop.named?.contains(token) != true else { return }
      drop.named = drop.named ?? HeaderNameSet([])
      drop.named!.insert(token)
    }
    headers.forEachToken(.connection, add)
    headers.forEachToken(.proxyConnection, add)
    return drop
  }

  /// Appends the fields `endToEnd` keeps, in order, as received.
  static func writeEndToEnd(_ headers: HTTPHeaders, dropping fixed: UInt32, to out: inout ByteWriter) {
    let drop = dropped(headers, fixed: fixed)
    headers.writeFields(to: &out) { known, name in !drop.drops(known, name) }
  }
}
