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
  /// When set, parsing stops after each complete message: the bytes of the
  /// next one wait, unparsed, until `resume()`. A session sets it so that a
  /// client pipelining thousands of tiny requests costs one buffered read,
  /// not thousands of parsed heads (and an upstream that sends more than the
  /// response asked for is noticed: `hasBufferedInput`).
  public let pausesBetweenMessages: Bool
  var state: State = .head
  /// Input kept between feeds, unconsumed from `consumed` on: only what could
  /// not be parsed where it arrived (a partial head or line, a paused next
  /// message, what follows a CONNECT). Appended to in place, so a head that
  /// arrives a byte at a time is neither copied nor re-scanned per byte.
  var buffer: [UInt8] = []
  /// Between feeds an index into `buffer`; while a read is parsed in place,
  /// into that read.
  var consumed = 0
  /// Where the search for the end of a head or trailer section resumes
  /// (indexing as `consumed` does; bytes before it were already scanned).
  var scanned = 0
  var paused = false
  /// Kept buffers whose bytes were lent as body events, held until the
  /// parser is next called (see `BorrowedEvent`).
  var lent: [[UInt8]] = []
  /// Set by every body piece handed out; `parseBuffer` clears it before its
  /// steps, so afterwards it says whether any came from the kept buffer.
  var bodyFromKept = false
  /// A finished head's storage and field table, for the next head (`recycle`).
  var spareHead: [UInt8] = []
  var spareTable: [HTTPHeaders.Entry] = []
  /// The peer closed while parsing was paused; applied on `resume()`.
  var inputFinished = false
  var responseToMethod = "GET"
  /// Interim (1xx) responses seen for the current request: each is relayed,
  /// so an origin sending them forever would hold the exchange and fill the
  /// client's queue. nginx and HAProxy accept a handful; past this, the
  /// response is malformed.
  var interimResponses = 0
  public static let maxInterimResponses = 8

  public init(
    role: Role, limits: HTTPLimits = HTTPLimits(), pausesBetweenMessages: Bool = false, spares: Spares? = nil
  ) {
    self.role = role
    self.limits = limits
    self.pausesBetweenMessages = pausesBetweenMessages
    if let spares {
      (buffer, spareHead, spareTable) = (spares.buffer, spares.head, spares.table)
    }
  }

  /// The storage a parser grows and keeps (its kept-input buffer, a head's
  /// bytes and field table), emptied, for another parser of the same kind:
  /// a connection that ends hands its parser's on to the next one.
  public struct Spares {
    var buffer: [UInt8]
    var head: [UInt8]
    var table: [HTTPHeaders.Entry]
  }

  /// This parser's storage, emptied (empty parts where it holds more than a
  /// recycled head may: a large buffer is let go of, not kept); the parser
  /// is left without it and must not be used again.
  public mutating func takeSpares() -> Spares {
    func emptied<Element>(_ array: inout [Element]) -> [Element] {
      var taken: [Element] = []
      swap(&taken, &array)
      guard taken.capacity <= Self.recycledHeadLimit else { return [] }
      taken.removeAll(keepingCapacity: true)
      return taken
    }
    lent.removeAll()
    return Spares(buffer: emptied(&buffer), head: emptied(&spareHead), table: emptied(&spareTable))
  }

  /// Starts over for another connection of the same kind (a retired
  /// session's next client): every field as `init` leaves it, the storage
  /// it grew emptied in place (a large kept buffer let go of, as
  /// `takeSpares` does), so nothing of the last connection's bytes remains.
  /// Cheaper than `takeSpares` and a new parser: no array is moved out and
  /// back, and an empty one is not touched.
  public mutating func restart() {
    state = .head
    if buffer.capacity > Self.recycledHeadLimit {
      buffer = []
    } else if !buffer.isEmpty {
      buffer.removeAll(keepingCapacity: true)
    }
    if !spareHead.isEmpty { spareHead.removeAll(keepingCapacity: true) }
    if !spareTable.isEmpty { spareTable.removeAll(keepingCapacity: true) }
    if !lent.isEmpty { lent.removeAll() }
    (consumed, scanned, paused, bodyFromKept, inputFinished) = (0, 0, false, false, false)
    responseToMethod = "GET"
    interimResponses = 0
  }

  /// True between messages, when nothing of the next one has arrived.
  public var isIdle: Bool { state == .head && !hasBufferedInput }

  /// Bytes received and not yet parsed (a paused next message, or a partial head).
  public var hasBufferedInput: Bool { consumed < buffer.count }

  /// True after a complete message when parsing pauses between messages.
  public var isPaused: Bool { paused }

  /// How many received bytes wait unparsed.
  public var bufferedByteCount: Int { buffer.count - consumed }

  /// True after a CONNECT head, or a 2xx response to one; `takeLeftover()`
  /// returns the bytes after it.
  public var isUpgraded: Bool { state == .upgraded }

  /// Responses need to know the request's method (HEAD has no body).
  public mutating func expectResponse(to method: String) {
    responseToMethod = method
    interimResponses = 0
  }

  /// Bytes received after the head that switched to another protocol.
  public mutating func takeLeftover() -> [UInt8] {
    defer { clearBuffer() }
    return Array(buffer[consumed...])
  }

  /// Parses straight from `input` into `sink`. `input` need not outlive the
  /// call (a socket's or TLS's reused read buffer): body bytes are handed to
  /// the sink as they lie (see `BorrowedEvent`), never copied by the parser,
  /// and only what cannot be parsed yet (a partial head or line, the next
  /// message while paused, what follows a CONNECT) is kept.
  mutating func parse<Sink: HTTP1EventSink>(_ input: UnsafeRawBufferPointer, into events: inout Sink)
    throws(HTTPParseError)
  {
    guard state != .failed else { throw HTTPParseError(.badRequest, "connection already failed") }
    lent.removeAll(keepingCapacity: true)
    if paused || state == .upgraded {
      buffer.append(contentsOf: input)
      return
    }
    do {
      var offset = 0
      // Kept bytes begin a head or a line that ends in this input. It is
      // completed one line at a time, so the bytes after its end (a body)
      // are not copied into `buffer` only to be copied out again.
      while hasBufferedInput && !paused && offset < input.count {
        let lineEnd = input[offset...].firstIndex(of: HTTP1Grammar.lf).map { $0 + 1 } ?? input.count
        buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[offset..<lineEnd]))
        offset = lineEnd
        try parseBuffer(&events)
      }
      let rest = UnsafeRawBufferPointer(rebasing: input[offset...])
      if hasBufferedInput || paused || state == .upgraded {
        buffer.append(contentsOf: rest)
      } else {
        try parseInPlace(rest, &events)
      }
    } catch {
      state = .failed
      clearBuffer()
      throw error
    }
  }

  /// After a pause between messages: parses what has arrived of the next
  /// one into `sink`, body bytes lent from the parser's buffer.
  mutating func resumeParsing<Sink: HTTP1EventSink>(into events: inout Sink) throws(HTTPParseError) {
    guard state != .failed else { throw HTTPParseError(.badRequest, "connection already failed") }
    lent.removeAll(keepingCapacity: true)
    guard paused else { return }
    paused = false
    do {
      try parseBuffer(&events)
    } catch {
      state = .failed
      clearBuffer()
      throw error
    }
    if inputFinished && !paused { try finishParsing(into: &events) }
  }

  /// Parses `input` where it lies, then keeps the part it could not use yet.
  /// Only called with nothing kept, so `consumed` and `scanned` index `input`
  /// here and `buffer` again afterwards.
  private mutating func parseInPlace<Sink: HTTP1EventSink>(
    _ input: UnsafeRawBufferPointer, _ events: inout Sink
  )
    throws(HTTPParseError)
  {
    consumed = 0
    scanned = 0
    while !paused, try step(input, &events) {}
    if consumed < input.count {
      buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[consumed...]))
      scanned = max(0, scanned - consumed)
    } else {
      scanned = 0
    }
    consumed = 0
  }

  /// Parses the kept bytes as far as they go.
  private mutating func parseBuffer<Sink: HTTP1EventSink>(_ events: inout Sink) throws(HTTPParseError) {
    // A second reference to the storage, not a copy: the steps read it while
    // they change the rest of the parser (nothing appends to it meanwhile).
    let kept = buffer
    bodyFromKept = false
    let result: Result<Void, HTTPParseError> = kept.withUnsafeBytes { input in
      do throws(HTTPParseError) {
        while !paused, try step(input, &events) {}
        return .success(())
      } catch {
        return .failure(error)
      }
    }
    try result.get()
    // Body bytes lent from it must outlive this call: the storage is held
    // until the parser is next called. Only then: a head completed a line
    // at a time passes through here once per line, and holding each line's
    // storage would keep (and copy) the whole head again per line.
    if Sink.borrowsBody && bodyFromKept { lent.append(kept) }
    if consumed == buffer.count {
      clearBuffer()
    } else if consumed >= 64 * 1024 {
      // Keep the unconsumed tail at the front so the buffer does not creep.
      buffer.removeFirst(consumed)
      scanned = max(0, scanned - consumed)
      consumed = 0
    }
  }

  private mutating func clearBuffer() {
    buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
    consumed = 0
    scanned = 0
  }

  /// The peer closed its side. Ends a close-delimited response; anywhere
  /// else inside a message it is a truncation.
  mutating func finishParsing<Sink: HTTP1EventSink>(into events: inout Sink) throws(HTTPParseError) {
    switch state {
    case .untilClose:
      state = .head
      events.append(.end(trailers: HTTPHeaders()))
    case .head where paused:
      // What follows the delivered message is judged once parsing resumes.
      inputFinished = true
    case .head where !hasBufferedInput, .upgraded:
      break
    default:
      state = .failed
      throw HTTPParseError(.truncated, "connection closed in the middle of a message")
    }
  }

  /// A final message ended: the next one starts, unless parsing pauses here.
  private mutating func endMessage<Sink: HTTP1EventSink>(_ trailers: HTTPHeaders, _ events: inout Sink) {
    state = .head
    scanned = consumed
    events.append(.end(trailers: trailers))
    if pausesBetweenMessages { paused = true }
  }

  /// Advances by one state transition over `input` (the kept buffer, or a
  /// read parsed in place), from `consumed`; false when it needs more input.
  private mutating func step<Sink: HTTP1EventSink>(_ input: UnsafeRawBufferPointer, _ events: inout Sink)
    throws(HTTPParseError) -> Bool
  {
    guard consumed < input.count else { return false }
    switch state {
    case .head:
      // RFC 9112 §2.2: ignore empty lines before a request or status line.
      while consumed + 1 < input.count && input[consumed] == 0x0d && input[consumed + 1] == 0x0a {
        consumed += 2
      }
      let start = consumed
      guard
        let head = try HTTP1Grammar.section(
          input, &consumed, resumeAt: max(scanned, start), limit: limits.maxHeaderBytes,
          what: "header section")
      else {
        scanned = max(start, input.count - 3)
        return false
      }
      try beginMessage(copyHead(input[head]), &events)
      return true
    case .fixedBody(let remaining):
      let count = min(remaining, input.count - consumed)
      events.appendBody(UnsafeRawBufferPointer(rebasing: input[consumed..<consumed + count]))
      bodyFromKept = true
      consumed += count
      if count == remaining {
        endMessage(HTTPHeaders(), &events)
      } else {
        state = .fixedBody(remaining: remaining - count)
      }
      return true
    case .chunkSize:
      guard let line = try HTTP1Grammar.line(input, &consumed, limit: 1024, what: "chunk size line") else {
        return false
      }
      let size = try HTTP1Grammar.chunkSize(line)
      state = size == 0 ? .trailers : .chunkData(remaining: size)
      scanned = consumed
      return true
    case .chunkData(let remaining):
      let count = min(remaining, input.count - consumed)
      events.appendBody(UnsafeRawBufferPointer(rebasing: input[consumed..<consumed + count]))
      bodyFromKept = true
      consumed += count
      state = count == remaining ? .chunkDataEnd : .chunkData(remaining: remaining - count)
      return true
    case .chunkDataEnd:
      guard let line = try HTTP1Grammar.line(input, &consumed, limit: 2, what: "chunk terminator") else {
        return false
      }
      guard line.isEmpty else { throw HTTPParseError(.badRequest, "chunk data longer than its size") }
      state = .chunkSize
      return true
    case .trailers:
      if input.count - consumed >= 2 && input[consumed] == 0x0d && input[consumed + 1] == 0x0a {
        consumed += 2
        endMessage(HTTPHeaders(), &events)
        return true
      }
      let start = consumed
      guard
        let section = try HTTP1Grammar.section(
          input, &consumed, resumeAt: max(scanned, start), limit: limits.maxHeaderBytes,
          what: "trailer section")
      else {
        scanned = max(start, input.count - 3)
        return false
      }
      let copied = Array(input[section])
      let trailers = try HTTP1Grammar.fields(copied[...], in: copied, limits: limits)
      endMessage(trailers, &events)
      return true
    case .untilClose:
      events.appendBody(UnsafeRawBufferPointer(rebasing: input[consumed...]))
      bodyFromKept = true
      consumed = input.count
      return true
    case .upgraded, .failed:
      return false
    }
  }

  /// The head's own copy of its bytes, in the storage of a recycled head
  /// when there is one.
  private mutating func copyHead(_ bytes: Slice<UnsafeRawBufferPointer>) -> [UInt8] {
    var copy: [UInt8] = []
    swap(&copy, &spareHead)
    // Emptied and refilled by one copy of the buffer (a slice of a raw
    // buffer appended as a sequence went through the generic path).
    if !copy.isEmpty { copy.removeAll(keepingCapacity: true) }
    copy.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes))
    return copy
  }

  /// A head the caller is done with (its exchange ended, its response was
  /// relayed): its storage and table serve the next head, so a keep-alive
  /// connection's heads allocate nothing once warm. Storage still shared
  /// with a copy elsewhere is copied on its next change, as any array.
  public mutating func recycle(_ headers: consuming HTTPHeaders) {
    let (storage, table) = headers.surrender()
    guard storage.capacity <= Self.recycledHeadLimit else { return }
    spareHead = storage
    spareTable = table
  }

  /// A larger head's storage is let go of rather than kept for the next.
  static let recycledHeadLimit = 16 * 1024

  private mutating func beginMessage<Sink: HTTP1EventSink>(_ head: [UInt8], _ events: inout Sink)
    throws(HTTPParseError)
  {
    var table: [HTTPHeaders.Entry] = []
    swap(&table, &spareTable)
    switch role {
    case .request:
      var request = try HTTP1Grammar.requestHead(head, table: consume table, limits: limits)
      if request.method == "CONNECT" {
        events.append(.request(request))
        state = .upgraded
        return
      }
      let framing = try HTTP1Framing.request(request.headers)
      request.framing = framing
      // Moved into the event, not copied (a head's copy retains its buffers).
      events.append(.request(consume request))
      enterBody(framing, &events)
    case .response:
      var response = try HTTP1Grammar.responseHead(head, table: consume table, limits: limits)
      if (100..<200).contains(response.status) {
        // An interim response: the final one follows for the same request.
        interimResponses += 1
        guard interimResponses <= Self.maxInterimResponses else {
          throw HTTPParseError(.badRequest, "more than \(Self.maxInterimResponses) interim (1xx) responses")
        }
        events.append(.response(response))
        events.append(.end(trailers: HTTPHeaders()))
        state = .head
        scanned = consumed
        return
      }
      if responseToMethod == "CONNECT" && (200..<300).contains(response.status) {
        // RFC 9110 §9.3.6: a 2xx answer to CONNECT has no content; the
        // connection is a tunnel from the blank line on, whatever its
        // fields say (`takeLeftover` gives what followed the head).
        events.append(.response(response))
        state = .upgraded
        return
      }
      let framing = try HTTP1Framing.response(response, toMethod: responseToMethod)
      response.framing = framing
      events.append(.response(consume response))
      enterBody(framing, &events)
    }
  }

  private mutating func enterBody<Sink: HTTP1EventSink>(_ framing: BodyFraming, _ events: inout Sink) {
    switch framing {
    case .none:
      endMessage(HTTPHeaders(), &events)
    case .length(let length) where length == 0:
      endMessage(HTTPHeaders(), &events)
    case .length(let length): state = .fixedBody(remaining: length)
    case .chunked: state = .chunkSize
    case .untilClose: state = .untilClose
    }
  }
}
