/// How a message's body is delimited (RFC 9112 §6.3), decided from its head.
enum HTTP1Framing {
  typealias Body = BodyFraming

  /// Requests: `chunked` alone, or a Content-Length, or no body. Both
  /// together, any other transfer coding, or disagreeing lengths are refused:
  /// these are the shapes two parsers may frame differently.
  static func request(_ headers: HTTPHeaders) throws(HTTPParseError) -> Body {
    let hasLength = headers.contains(.contentLength)
    if headers.contains(.transferEncoding) {
      guard !hasLength else { throw HTTPParseError(.badRequest, "both Transfer-Encoding and Content-Length") }
      guard headers.hasOnlyToken(.transferEncoding, "chunked") else {
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
    if head.headers.contains(.transferEncoding) {
      guard !head.headers.contains(.contentLength) else {
        throw HTTPParseError(.badRequest, "response has both Transfer-Encoding and Content-Length")
      }
      guard head.headers.hasOnlyToken(.transferEncoding, "chunked") else {
        throw HTTPParseError(.badRequest, "response Transfer-Encoding other than a single chunked")
      }
      return .chunked
    }
    if head.headers.contains(.contentLength) { return .length(try contentLength(head.headers)) }
    return .untilClose
  }

  /// All Content-Length values (and list elements) must be the same digits.
  static func contentLength(_ headers: HTTPHeaders) throws(HTTPParseError) -> Int {
    // Every element of every field, each compared with the first, in place
    // (the values are valid through the one call that lends them).
    var first: UnsafeBufferPointer<UInt8>?
    var differ = false
    var parsed: Result<Int, HTTPParseError>?
    headers.forEachValue(.contentLength) { value in
      var start = 0
      while start <= value.count {
        var end = start
        while end < value.count && value[end] != UInt8(ascii: ",") { end += 1 }
        var (low, high) = (start, end)
        while low < high && ASCII.isBlank(value[low]) { low += 1 }
        while high > low && ASCII.isBlank(value[high - 1]) { high -= 1 }
        let element = UnsafeBufferPointer(rebasing: value[low..<high])
        if let first {
          guard first.elementsEqual(element) else {
            differ = true
            return false
          }
        } else {
          first = element
          parsed =
            decimal(element).map { .success($0) }
            ?? .failure(
              HTTPParseError(
                .badRequest,
                "invalid Content-Length \"\(String(decoding: element.prefix(40), as: UTF8.self))\""))
        }
        start = end + 1
      }
      return true
    }
    guard !differ, let parsed else { throw HTTPParseError(.badRequest, "differing Content-Length values") }
    return try parsed.get()
  }

  /// 1 to 18 decimal digits (so the value fits an Int), or nil.
  private static func decimal(_ digits: UnsafeBufferPointer<UInt8>) -> Int? {
    guard !digits.isEmpty, digits.count <= 18 else { return nil }
    var value = 0
    for digit in digits {
      guard digit >= 0x30 && digit <= 0x39 else { return nil }
      value = value * 10 + Int(digit - 0x30)
    }
    return value
  }
}
