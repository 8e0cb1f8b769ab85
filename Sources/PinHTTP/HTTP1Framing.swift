/// How a message's body is delimited (RFC 9112 §6.3), decided from its head.
enum HTTP1Framing {
  typealias Body = BodyFraming

  /// Requests: `chunked` alone, or a Content-Length, or no body. Both
  /// together, any other transfer coding, or disagreeing lengths are refused:
  /// these are the shapes two parsers may frame differently.
  static func request(_ headers: HTTPHeaders) throws(HTTPParseError) -> Body {
    let codings = headers.tokens("Transfer-Encoding")
    let hasLength = headers.contains("Content-Length")
    if headers.contains("Transfer-Encoding") {
      guard !hasLength else { throw HTTPParseError(.badRequest, "both Transfer-Encoding and Content-Length") }
      guard codings == ["chunked"] else {
        throw HTTPParseError(.badRequest, "Transfer-Encoding other than a single chunked")
      }
      return .chunked
    }
    guard hasLength else { return .none }
    return .length(try contentLength(headers))
  }

  /// Responses: none for HEAD, 1xx, 204 and 304; chunked; a length; or until close.
  static func response(_ head: HTTPResponseHead, toMethod method: String) throws(HTTPParseError) -> Body {
    if method == "HEAD" || head.status == 204 || head.status == 304 || (100..<200).contains(head.status) {
      return .none
    }
    if head.headers.contains("Transfer-Encoding") {
      guard !head.headers.contains("Content-Length") else {
        throw HTTPParseError(.badRequest, "response has both Transfer-Encoding and Content-Length")
      }
      guard head.headers.tokens("Transfer-Encoding") == ["chunked"] else {
        throw HTTPParseError(.badRequest, "response Transfer-Encoding other than a single chunked")
      }
      return .chunked
    }
    if head.headers.contains("Content-Length") { return .length(try contentLength(head.headers)) }
    return .untilClose
  }

  /// All Content-Length values (and list elements) must be the same digits.
  static func contentLength(_ headers: HTTPHeaders) throws(HTTPParseError) -> Int {
    var first: ArraySlice<UInt8>?
    // Only the Content-Length fields are looked at as values.
    var next = headers.index(named: "Content-Length", from: 0)
    while let index = next {
      let field = headers[index]
      next = headers.index(named: "Content-Length", from: index + 1)
      var start = field.valueSlice.startIndex
      while start <= field.valueSlice.endIndex {
        let end = field.valueSlice[start...].firstIndex(of: UInt8(ascii: ",")) ?? field.valueSlice.endIndex
        var element = field.valueSlice[start..<end]
        while let byte = element.first, ASCII.isBlank(byte) { element = element.dropFirst() }
        while let byte = element.last, ASCII.isBlank(byte) { element = element.dropLast() }
        if let first {
          guard first.elementsEqual(element) else {
            throw HTTPParseError(.badRequest, "differing Content-Length values")
          }
        } else {
          first = element
        }
        start = end + 1
      }
    }
    guard let first else { throw HTTPParseError(.badRequest, "differing Content-Length values") }
    guard !first.isEmpty, first.count <= 18, first.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      let shown = String(decoding: first.prefix(40), as: UTF8.self)
      throw HTTPParseError(.badRequest, "invalid Content-Length \"\(shown)\"")
    }
    return first.reduce(0) { $0 * 10 + Int($1 - 0x30) }
  }
}
