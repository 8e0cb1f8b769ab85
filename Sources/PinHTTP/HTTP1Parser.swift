/// A strict HTTP/1.1 message parser (RFC 9112) written as a state machine.
///
/// Feed it bytes in any split; it returns events: a head, body pieces as they
/// arrive (never a whole body), and the end of each message. It refuses the
/// shapes that let two parsers disagree about where a message ends (request
/// smuggling): Content-Length beside Transfer-Encoding, differing duplicate
/// Content-Lengths, any transfer coding but a single `chunked`, bad chunk
/// sizes, obs-fold, bare CR or LF, NUL, and whitespace before a colon.
/// After an error the parser stays failed: the connection must be closed.
public struct HTTP1Parser: Sendable {
  public enum Role: Sendable { case request, response }

  public enum Event: Sendable, Equatable {
    case request(HTTPRequestHead)
    case response(HTTPResponseHead)
    case body([UInt8])
    /// The message is complete; trailers are empty unless a chunked body sent some.
    case end(trailers: HTTPHeaders)
  }

  enum State: Sendable, Equatable {
    case head
    case fixedBody(remaining: Int)
    case chunkSize
    case chunkData(remaining: Int)
    case chunkDataEnd
    case trailers
    case untilClose
    /// After a CONNECT request head: what follows is not HTTP.
    case upgraded
    case failed
  }

  public let role: Role
  public let limits: HTTPLimits
  var state: State = .head
  var buffer: [UInt8] = []
  /// Where the search for the end of the head resumes (bytes already scanned).
  var scanned = 0
  var responseToMethod = "GET"

  public init(role: Role, limits: HTTPLimits = HTTPLimits()) {
    self.role = role
    self.limits = limits
  }

  /// True between messages, when nothing of the next one has arrived.
  public var isIdle: Bool { state == .head && buffer.isEmpty }

  /// True after a CONNECT head; `takeLeftover()` returns the bytes after it.
  public var isUpgraded: Bool { state == .upgraded }

  /// Responses need to know the request's method (HEAD has no body).
  public mutating func expectResponse(to method: String) { responseToMethod = method }

  /// Bytes received after the head that switched to another protocol.
  public mutating func takeLeftover() -> [UInt8] {
    defer { buffer = [] }
    return buffer
  }

  public mutating func feed(_ bytes: [UInt8]) throws(HTTPParseError) -> [Event] {
    guard state != .failed else { throw HTTPParseError(.badRequest, "connection already failed") }
    if state == .upgraded {
      buffer += bytes
      return []
    }
    // Only an incomplete head, chunk line or trailer section waits in `buffer`.
    let input = buffer.isEmpty ? bytes : buffer + bytes
    let resumeScan = buffer.isEmpty ? 0 : scanned
    buffer = []
    var events: [Event] = []
    var index = 0
    do {
      while try step(input, &index, resumeScan: index == 0 ? resumeScan : 0, &events) {}
    } catch {
      state = .failed
      throw error
    }
    if index < input.count {
      buffer = Array(input[index...])
      scanned = buffer.count
    } else {
      scanned = 0
    }
    return events
  }

  /// The peer closed its side. Ends a close-delimited response; anywhere
  /// else inside a message it is a truncation.
  public mutating func finish() throws(HTTPParseError) -> [Event] {
    switch state {
    case .untilClose:
      state = .head
      return [.end(trailers: HTTPHeaders())]
    case .head where buffer.isEmpty, .upgraded:
      return []
    default:
      state = .failed
      throw HTTPParseError(.truncated, "connection closed in the middle of a message")
    }
  }

  /// Advances by one state transition; false when it needs more input.
  private mutating func step(_ input: [UInt8], _ index: inout Int, resumeScan: Int, _ events: inout [Event])
    throws(HTTPParseError) -> Bool
  {
    guard index < input.count else { return false }
    switch state {
    case .head:
      // RFC 9112 §2.2: ignore empty lines before a request or status line.
      while index + 1 < input.count && input[index] == 0x0d && input[index + 1] == 0x0a { index += 2 }
      guard
        let head = try HTTP1Grammar.section(
          input, &index, resumeScan: resumeScan, limit: limits.maxHeaderBytes, what: "header section")
      else { return false }
      try beginMessage(head, &events)
      return true
    case .fixedBody(let remaining):
      let count = min(remaining, input.count - index)
      events.append(.body(Array(input[index..<index + count])))
      index += count
      if count == remaining {
        state = .head
        events.append(.end(trailers: HTTPHeaders()))
      } else {
        state = .fixedBody(remaining: remaining - count)
      }
      return true
    case .chunkSize:
      guard let line = try HTTP1Grammar.line(input, &index, limit: 1024, what: "chunk size line") else {
        return false
      }
      let size = try HTTP1Grammar.chunkSize(line)
      state = size == 0 ? .trailers : .chunkData(remaining: size)
      return true
    case .chunkData(let remaining):
      let count = min(remaining, input.count - index)
      events.append(.body(Array(input[index..<index + count])))
      index += count
      state = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
      return true
    case .chunkDataEnd:
      guard let line = try HTTP1Grammar.line(input, &index, limit: 2, what: "chunk terminator") else {
        return false
      }
      guard line.isEmpty else { throw HTTPParseError(.badRequest, "chunk data longer than its size") }
      state = .chunkSize
      return true
    case .trailers:
      if input.count - index >= 2 && input[index] == 0x0d && input[index + 1] == 0x0a {
        index += 2
        state = .head
        events.append(.end(trailers: HTTPHeaders()))
        return true
      }
      guard
        let section = try HTTP1Grammar.section(
          input, &index, resumeScan: resumeScan, limit: limits.maxHeaderBytes, what: "trailer section")
      else { return false }
      let trailers = try HTTP1Grammar.fields(section[...], limits: limits)
      state = .head
      events.append(.end(trailers: trailers))
      return true
    case .untilClose:
      events.append(.body(Array(input[index...])))
      index = input.count
      return true
    case .upgraded:
      buffer += input[index...]
      index = input.count
      return false
    case .failed:
      return false
    }
  }

  private mutating func beginMessage(_ head: ArraySlice<UInt8>, _ events: inout [Event])
    throws(HTTPParseError)
  {
    switch role {
    case .request:
      let request = try HTTP1Grammar.requestHead(head, limits: limits)
      events.append(.request(request))
      if request.method == "CONNECT" {
        state = .upgraded
        return
      }
      try enterBody(HTTP1Framing.request(request.headers), &events)
    case .response:
      let response = try HTTP1Grammar.responseHead(head, limits: limits)
      events.append(.response(response))
      if (100..<200).contains(response.status) {
        // An interim response: the final one follows for the same request.
        events.append(.end(trailers: HTTPHeaders()))
        return
      }
      try enterBody(HTTP1Framing.response(response, toMethod: responseToMethod), &events)
    }
  }

  private mutating func enterBody(_ framing: HTTP1Framing.Body, _ events: inout [Event]) {
    switch framing {
    case .none:
      state = .head
      events.append(.end(trailers: HTTPHeaders()))
    case .length(let length) where length == 0:
      state = .head
      events.append(.end(trailers: HTTPHeaders()))
    case .length(let length): state = .fixedBody(remaining: length)
    case .chunked: state = .chunkSize
    case .untilClose: state = .untilClose
    }
  }
}
