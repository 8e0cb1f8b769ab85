/// The byte-level grammar of RFC 9112: sections, lines, start lines, fields.
enum HTTP1Grammar {
  static let cr: UInt8 = 0x0d
  static let lf: UInt8 = 0x0a

  /// Finds CRLFCRLF at or after `index` and returns where the bytes before
  /// it lie, moving `index` past it; nil when more input is needed. The scan starts
  /// at `resumeAt` (bytes before it were scanned by an earlier call, which
  /// stopped at least three bytes short of the end so a terminator split
  /// across reads is still seen). A bare LF, a bare CR or a NUL anywhere in
  /// the section is an error at once.
  static func section(
    _ input: UnsafeRawBufferPointer, _ index: inout Int, resumeAt: Int, limit: Int, what: String
  ) throws(HTTPParseError) -> Range<Int>? {
    let start = index
    var position = max(start, resumeAt)
    // Where word steps end: the input's end, or the limit's if sooner.
    let wordsEnd = limit < input.count - start ? start + limit : input.count
    while position < input.count {
      // Eight bytes a step up to the first LF, CR or NUL, while the limit is
      // not within the step: the bytes before it need nothing but skipping.
      while position &+ 8 <= wordsEnd {
        let skipped = firstLineByte(ByteWord.load(input, position))
        position += skipped
        if skipped < 8 { break }
      }
      guard position < input.count else { break }
      let byte = input[position]
      if byte == cr, position + 1 < input.count {
        guard input[position + 1] == lf else { throw HTTPParseError(.badRequest, "bare CR in \(what)") }
        // The LF that follows is taken with its CR (the usual line end): one
        // step a line, not two; the size is checked at the CR first, as it
        // would be were the LF a step of its own.
        if position - start >= limit {
          throw HTTPParseError(.headersTooLarge, "\(what) exceeds \(limit) bytes")
        }
        position += 1
      } else if byte == lf {
        guard position > start, input[position - 1] == cr else {
          throw HTTPParseError(.badRequest, "bare LF in \(what)")
        }
      } else if byte == 0 {
        throw HTTPParseError(.badRequest, "NUL in \(what)")
      }
      // A line's LF, reached either way: a blank line ends the section.
      if input[position] == lf && position - start >= 3 && input[position - 2] == lf
        && input[position - 3] == cr
      {
        index = position + 1
        return start..<(position - 3)
      }
      if position - start >= limit {
        throw HTTPParseError(.headersTooLarge, "\(what) exceeds \(limit) bytes")
      }
      position += 1
    }
    if input.count - start > limit {
      throw HTTPParseError(.headersTooLarge, "\(what) exceeds \(limit) bytes")
    }
    return nil
  }

  /// Where the first LF, CR or NUL of `word` lies (8: none).
  @inline(__always)
  static func firstLineByte(_ word: UInt64) -> Int {
    ByteWord.first(ByteWord.zeros(word) | ByteWord.equal(word, lf) | ByteWord.equal(word, cr))
  }

  /// Where the first control byte or DEL of `word` lies (8: none): the
  /// bytes a field value may not hold, but for HTAB (which the caller lets
  /// pass) and the CR that ends the line.
  @inline(__always)
  static func firstControlByte(_ word: UInt64) -> Int {
    ByteWord.first(ByteWord.below(word, 0x20) | ByteWord.equal(word, 0x7f))
  }

  /// One CRLF-terminated line starting at `index`, without its CRLF.
  static func line(_ input: UnsafeRawBufferPointer, _ index: inout Int, limit: Int, what: String)
    throws(HTTPParseError)
    -> [UInt8]?
  {
    var position = index
    while position < input.count {
      if input[position] == lf {
        guard position > index, input[position - 1] == cr else {
          throw HTTPParseError(.badRequest, "bare LF in \(what)")
        }
        let line = Array(input[index..<(position - 1)])
        guard !line.contains(cr), !line.contains(0) else {
          throw HTTPParseError(.badRequest, "bare CR in \(what)")
        }
        index = position + 1
        return line
      }
      if position - index > limit { throw HTTPParseError(.badRequest, "\(what) too long") }
      position += 1
    }
    if input.count - index > limit + 1 { throw HTTPParseError(.badRequest, "\(what) too long") }
    return nil
  }

  /// `1*HEXDIG [ chunk-ext ]`; at most 15 hex digits so the size fits an Int.
  static func chunkSize(_ line: [UInt8]) throws(HTTPParseError) -> Int {
    let digits = line.prefix { isHexDigit($0) }
    guard !digits.isEmpty, digits.count <= 15 else { throw HTTPParseError(.badRequest, "bad chunk size") }
    let rest = line.dropFirst(digits.count)
    if let first = rest.first {
      // Only chunk extensions may follow: optional whitespace then ';'.
      let afterSpace = rest.drop { $0 == 0x20 || $0 == 0x09 }
      guard first == 0x3b || afterSpace.first == 0x3b else {
        throw HTTPParseError(.badRequest, "bad chunk size")
      }
      guard afterSpace.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }) else {
        throw HTTPParseError(.badRequest, "control character in chunk extension")
      }
    }
    return digits.reduce(0) { $0 * 16 + hexValue($1) }
  }

  /// `head` is the section's own copy: its fields stay indices into it.
  static func requestHead(_ head: [UInt8], table: consuming [HTTPHeaders.Entry] = [], limits: HTTPLimits)
    throws(HTTPParseError)
    -> HTTPRequestHead
  {
    let line = startLine(head)
    let (startLine, fieldBytes) = (head[..<line.end], head[min(head.count, line.end + 2)...])
    // method SP request-target SP HTTP-version: exactly two spaces.
    guard let first = line.firstSpace, let second = line.secondSpace, !line.moreSpaces,
      let method = method(startLine[..<first])
    else {
      throw HTTPParseError(.badRequest, "malformed request line")
    }
    let targetBytes = startLine[(first + 1)..<second]
    guard targetBytes.count <= limits.maxURILength else {
      throw HTTPParseError(.uriTooLong, "request target longer than \(limits.maxURILength) bytes")
    }
    guard !targetBytes.isEmpty, allVisible(targetBytes) else {
      throw HTTPParseError(.badRequest, "malformed request target")
    }
    let version = try httpVersion(startLine[(second + 1)...])
    guard let target = RequestTarget.parse(targetBytes, method: method) else {
      let shown = String(decoding: targetBytes.prefix(200), as: UTF8.self)
      throw HTTPParseError(.badRequest, "request target \"\(shown)\" is not valid for \(method)")
    }
    let headers = try fields(fieldBytes, in: head, table: consume table, limits: limits)
    try checkHost(headers, version: version, method: method)
    return HTTPRequestHead(
      method: method, target: target, rawTargetBytes: targetBytes, version: version, headers: headers)
  }

  /// Whether every byte is visible ASCII (0x21...0x7E), eight a step.
  static func allVisible(_ bytes: ArraySlice<UInt8>) -> Bool {
    bytes.withUnsafeBytes { buffer in
      var position = 0
      while position + 8 <= buffer.count {
        guard ByteWord.firstNotVisible(ByteWord.load(buffer, position)) == 8 else { return false }
        position += 8
      }
      while position < buffer.count {
        guard buffer[position] > 0x20 && buffer[position] < 0x7f else { return false }
        position += 1
      }
      return true
    }
  }

  /// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host, and no
  /// request carries two; the value must be an authority. Two parsers that
  /// pick different Hosts would route one request two ways. CONNECT names its
  /// authority in the target, so there Host may be absent (old clients omit it).
  static func checkHost(_ headers: HTTPHeaders, version: HTTPVersion, method: String) throws(HTTPParseError) {
    guard let first = headers.index(of: .host, from: 0) else {
      if version == .http11 && method != "CONNECT" {
        throw HTTPParseError(.badRequest, "an HTTP/1.1 request needs a Host header field")
      }
      return
    }
    // One pass finds the first and looks on for a second.
    guard headers.index(of: .host, from: first + 1) == nil else {
      throw HTTPParseError(.badRequest, "more than one Host header field")
    }
    let host = headers[first].valueSlice
    guard host.isEmpty || RequestTarget.authorityParts(host) != nil else {
      throw HTTPParseError(.badRequest, "the Host header field is not a valid authority")
    }
  }

  static func responseHead(_ head: [UInt8], table: consuming [HTTPHeaders.Entry] = [], limits: HTTPLimits)
    throws(HTTPParseError)
    -> HTTPResponseHead
  {
    let line = startLine(head)
    let (startLine, fieldBytes) = (head[..<line.end], head[min(head.count, line.end + 2)...])
    // HTTP-version SP 3DIGIT [SP reason]: the parts found in place.
    guard let first = line.firstSpace else {
      throw HTTPParseError(.badRequest, "malformed status line")
    }
    let rest = startLine[(first + 1)...]
    let second = line.secondSpace
    let digits = rest[..<(second ?? rest.endIndex)]
    guard digits.count == 3, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
      throw HTTPParseError(.badRequest, "malformed status line")
    }
    let status = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
    guard status >= 100 else { throw HTTPParseError(.badRequest, "malformed status line") }
    let version = try httpVersion(startLine[..<first])
    let reason = second.map { reasonPhrase(rest[($0 + 1)...]) } ?? ""
    let headers = try fields(fieldBytes, in: head, table: consume table, limits: limits)
    return HTTPResponseHead(version: version, status: status, reason: reason, headers: headers)
  }

  /// `field-name ":" OWS field-value OWS` lines; obs-fold and whitespace
  /// before the colon are refused (RFC 9112 §5.1, §5.2). `bytes` is a slice
  /// of `storage`: the list keeps `storage` and the ranges of each name and
  /// value in it, nothing per field.
  static func fields(
    _ bytes: ArraySlice<UInt8>, in storage: [UInt8], table: consuming [HTTPHeaders.Entry] = [],
    limits: HTTPLimits
  ) throws(HTTPParseError) -> HTTPHeaders {
    guard !bytes.isEmpty else { return HTTPHeaders() }
    // Over the bytes in place, one pass a line, as nginx's
    // ngx_http_parse_header_line does: names and values are kept as ranges
    // of `storage` (a slice's indices are the storage's). A field line takes
    // at least four bytes (`a:` CRLF), which sizes the table without a pass
    // to count lines.
    let base = bytes.startIndex
    var headers = HTTPHeaders(
      parsedFrom: storage, capacity: min(bytes.count / 4 + 1, limits.maxHeaderCount + 1), table: consume table
    )
    try bytes.withUnsafeBufferPointer { (buffer) throws(HTTPParseError) in
      let section = UnsafeRawBufferPointer(buffer)
      let count = section.count
      var lineStart = 0
      while lineStart < count {
        let first = section[lineStart]
        guard first != cr else { throw HTTPParseError(.badRequest, "empty header line") }
        guard first != 0x20 && first != 0x09 else {
          throw HTTPParseError(.badRequest, "obs-fold in header section")
        }
        // The name: token characters, then the colon.
        var colon = lineStart
        // Eight bytes a step over letters, digits and `-` (what nearly
        // every name is made of), then a byte at a time over the rest of
        // the token characters up to the colon.
        while colon + 8 <= count {
          let plain = plainNameBytes(ByteWord.load(section, colon))
          colon += plain
          if plain < 8 { break }
        }
        while colon < count && isTokenByte(section[colon]) { colon += 1 }
        guard colon > lineStart, colon < count, section[colon] == 0x3a else {
          throw HTTPParseError(.badRequest, "malformed header field (whitespace before the colon or no name)")
        }
        var valueStart = colon + 1
        while valueStart < count && (section[valueStart] == 0x20 || section[valueStart] == 0x09) {
          valueStart += 1
        }
        // The value runs to the CR ending the line (the section has no bare
        // CR) or to the section's end; eight bytes a step while none of them
        // is a control byte, which only HTAB and that CR may be.
        var lineEnd = valueStart
        scan: while lineEnd < count {
          while lineEnd + 8 <= count {
            let skipped = firstControlByte(ByteWord.load(section, lineEnd))
            lineEnd += skipped
            if skipped < 8 { break }
          }
          guard lineEnd < count else { break }
          let byte = section[lineEnd]
          if byte == cr { break scan }
          guard byte == 0x09 || (byte >= 0x20 && byte != 0x7f) else {
            let name = UnsafeRawBufferPointer(rebasing: section[lineStart..<min(colon, lineStart + 200)])
            throw HTTPParseError(
              .badRequest, "control character in header \(String(decoding: name, as: UTF8.self))")
          }
          lineEnd += 1
        }
        var valueEnd = lineEnd
        while valueEnd > valueStart && (section[valueEnd - 1] == 0x20 || section[valueEnd - 1] == 0x09) {
          valueEnd -= 1
        }
        let known = KnownField.recognize(UnsafeBufferPointer(rebasing: buffer[lineStart..<colon]))
        headers.appendParsed(
          name: (base + lineStart)..<(base + colon), value: (base + valueStart)..<(base + valueEnd),
          known: known)
        guard headers.count <= limits.maxHeaderCount else {
          throw HTTPParseError(.headersTooLarge, "more than \(limits.maxHeaderCount) header fields")
        }
        lineStart = lineEnd + 2
      }
    }
    return headers
  }

  /// How many of `word`'s bytes, from the first, are ASCII letters,
  /// digits or `-` (8: all). Exact for every byte: the high bits are set
  /// aside first, so each range test (`ByteWord.above`) marks exactly the
  /// bytes it matches, not only the first.
  @inline(__always)
  static func plainNameBytes(_ word: UInt64) -> Int {
    let low = word & ~ByteWord.highs
    let plain = (ByteWord.alphanumerics(low) | ByteWord.exactly(low, 0x2d)) & ~(word & ByteWord.highs)
    return ByteWord.first(~plain & ByteWord.highs)
  }

  @inline(__always)
  static func isTokenByte(_ byte: UInt8) -> Bool {
    if byte < 64 { return tokenBitsLow >> UInt64(byte) & 1 != 0 }
    if byte < 128 { return tokenBitsHigh >> UInt64(byte - 64) & 1 != 0 }
    return false
  }

  /// `isTokenCharacter` as bits, bytes 0–63 and 64–127 (HTTP1GrammarTests
  /// holds the two to the same answer for every byte).
  static let tokenBitsLow: UInt64 = 0x03ff_6cfa_0000_0000
  static let tokenBitsHigh: UInt64 = 0x57ff_ffff_c7ff_fffe

  /// Where a head's start line ends (its CR, or the head's end) and where
  /// its first two spaces lie, and whether more follow: found eight bytes a
  /// step (a space or CR marks a word), not by three scans of a slice.
  static func startLine(_ head: [UInt8]) -> (end: Int, firstSpace: Int?, secondSpace: Int?, moreSpaces: Bool)
  {
    head.withUnsafeBytes { bytes in
      var (first, second, more): (Int?, Int?, Bool) = (nil, nil, false)
      var position = 0
      while true {
        while position + 8 <= bytes.count {
          let word = ByteWord.load(bytes, position)
          let skipped = ByteWord.first(ByteWord.equal(word, 0x20) | ByteWord.equal(word, cr))
          position += skipped
          if skipped < 8 { break }
        }
        while position < bytes.count && bytes[position] != 0x20 && bytes[position] != cr { position += 1 }
        guard position < bytes.count, bytes[position] == 0x20 else { return (position, first, second, more) }
        if first == nil {
          first = position
        } else if second == nil {
          second = position
        } else {
          more = true
        }
        position += 1
      }
    }
  }

  /// The method, a token; the usual ones are the literals they are (no
  /// String made from the bytes).
  static func method(_ bytes: ArraySlice<UInt8>) -> String? {
    // The usual methods by length, then bytes: the literal is returned (no
    // String made, nothing generic over a collection per request).
    let known: String? = bytes.withUnsafeBufferPointer { buffer in
      func named(_ name: StaticString) -> Bool {
        // Only called with the name's own length.
        for index in 0..<buffer.count where buffer[index] != name.utf8Start[index] { return false }
        return true
      }
      switch buffer.count {
      case 3: return named("GET") ? "GET" : named("PUT") ? "PUT" : nil
      case 4: return named("POST") ? "POST" : named("HEAD") ? "HEAD" : nil
      case 5: return named("PATCH") ? "PATCH" : nil
      case 6: return named("DELETE") ? "DELETE" : nil
      case 7: return named("OPTIONS") ? "OPTIONS" : named("CONNECT") ? "CONNECT" : nil
      default: return nil
      }
    }
    return known ?? token(bytes)
  }

  /// The reason phrase as text; the usual `OK` is the literal (most
  /// responses), not a String decoded per response.
  static func reasonPhrase(_ bytes: ArraySlice<UInt8>) -> String {
    if bytes.count == 2, bytes.first == UInt8(ascii: "O"), bytes.last == UInt8(ascii: "K") { return "OK" }
    return String(decoding: bytes, as: UTF8.self)
  }

  private static let http11 = Array("HTTP/1.1".utf8)
  private static let http10 = Array("HTTP/1.0".utf8)

  static func httpVersion(_ bytes: ArraySlice<UInt8>) throws(HTTPParseError) -> HTTPVersion {
    // One word compare each: the usual versions are eight bytes.
    if bytes.count == 8 {
      let word = bytes.withUnsafeBytes { ByteWord.load($0, 0) }
      if word == version11 { return .http11 }
      if word == version10 { return .http10 }
    }
    let text = String(decoding: bytes, as: UTF8.self)
    if let version = HTTPVersion(rawValue: text) { return version }
    if text.hasPrefix("HTTP/"), text.count == 8 {
      throw HTTPParseError(.versionNotSupported, "\(text) is not supported")
    }
    throw HTTPParseError(.badRequest, "malformed HTTP version")
  }

  private static let version11 = http11.withUnsafeBytes { ByteWord.load($0, 0) }
  private static let version10 = http10.withUnsafeBytes { ByteWord.load($0, 0) }

  /// RFC 9110 §5.6.2 token characters.
  static func token(_ bytes: ArraySlice<UInt8>) -> String? {
    guard !bytes.isEmpty, bytes.allSatisfy(isTokenCharacter) else { return nil }
    return String(decoding: bytes, as: UTF8.self)
  }

  static func isTokenCharacter(_ byte: UInt8) -> Bool {
    switch byte {
    case 0x30...0x39, 0x41...0x5a, 0x61...0x7a: return true
    // ! # $ % & ' * + - . ^ _ ` | ~
    case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2a, 0x2b, 0x2d, 0x2e, 0x5e, 0x5f, 0x60, 0x7c, 0x7e: return true
    default: return false
    }
  }

  static func isHexDigit(_ byte: UInt8) -> Bool {
    (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
  }

  static func hexValue(_ byte: UInt8) -> Int {
    switch byte {
    case 0x30...0x39: return Int(byte - 0x30)
    case 0x41...0x46: return Int(byte - 0x41 + 10)
    default: return Int(byte - 0x61 + 10)
    }
  }
}
