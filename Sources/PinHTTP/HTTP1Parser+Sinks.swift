/// The parser's two ways of handing over what it finds: into a sink that
/// borrows body bytes from the input (the proxy's response path), or into
/// one that copies them (requests, which may wait for their upstream;
/// tests and fuzzers, through the array-returning calls).
extension HTTP1Parser {
  /// An event as the proxy's data path takes it: body bytes are not copied
  /// out but lent, straight from the input that was fed (or, for bytes the
  /// parser had kept, from its own buffer). They stay valid until the
  /// parser is next called and while that input lives: whoever takes them
  /// copies them once, into the next hop's send path, before returning.
  public enum BorrowedEvent {
    case request(HTTPRequestHead)
    case response(HTTPResponseHead)
    case body(UnsafeRawBufferPointer)
    case end(trailers: HTTPHeaders)
  }

  // The sink-taking calls, one per sink the proxy uses. Concrete, so that
  // the generic parser is specialized here, in its own module: called
  // generically from another module, every step would go through witness
  // tables.

  /// Parses straight from `input`; see `parse(_:into:)`.
  public mutating func feed(_ input: UnsafeRawBufferPointer, into events: inout BorrowedEvents)
    throws(HTTPParseError)
  { try parse(input, into: &events) }

  public mutating func feed(_ input: UnsafeRawBufferPointer, into events: inout CopiedEvents)
    throws(HTTPParseError)
  { try parse(input, into: &events) }

  /// After a pause between messages; see `resumeParsing(into:)`.
  public mutating func resume(into events: inout BorrowedEvents) throws(HTTPParseError) {
    try resumeParsing(into: &events)
  }

  public mutating func resume(into events: inout CopiedEvents) throws(HTTPParseError) {
    try resumeParsing(into: &events)
  }

  /// The peer closed its side; see `finishParsing(into:)`.
  public mutating func finish(into events: inout BorrowedEvents) throws(HTTPParseError) {
    try finishParsing(into: &events)
  }

  public mutating func finish(into events: inout CopiedEvents) throws(HTTPParseError) {
    try finishParsing(into: &events)
  }

  /// Parses `input` into `queue`, body bytes copied (they may wait there):
  /// the client side's parser appends straight to its machine's queue of
  /// events, no list between them.
  public mutating func feed(_ input: UnsafeRawBufferPointer, into queue: inout RingBuffer<Event>)
    throws(HTTPParseError)
  {
    try parse(input, into: &queue)
  }

  public mutating func resume(into queue: inout RingBuffer<Event>) throws(HTTPParseError) {
    try resumeParsing(into: &queue)
  }

  public mutating func finish(into queue: inout RingBuffer<Event>) throws(HTTPParseError) {
    try finishParsing(into: &queue)
  }

  /// Parses `input` and returns the events, body bytes copied out of it.
  public mutating func feed(_ input: UnsafeRawBufferPointer) throws(HTTPParseError) -> [Event] {
    try copying { (parser, events) throws(HTTPParseError) in try parser.feed(input, into: &events) }
  }

  /// The same for bytes already in an array (tests, fuzzers, a body held whole).
  public mutating func feed(_ bytes: [UInt8]) throws(HTTPParseError) -> [Event] {
    try copying { (parser, events) throws(HTTPParseError) in
      let result: Result<Void, HTTPParseError> = bytes.withUnsafeBytes { input in
        do throws(HTTPParseError) {
          return .success(try parser.feed(input, into: &events))
        } catch {
          return .failure(error)
        }
      }
      try result.get()
    }
  }

  /// `resume(into:)`, returning the events.
  public mutating func resume() throws(HTTPParseError) -> [Event] {
    try copying { (parser, events) throws(HTTPParseError) in try parser.resume(into: &events) }
  }

  /// `finish(into:)`, returning the events.
  public mutating func finish() throws(HTTPParseError) -> [Event] {
    try copying { (parser, events) throws(HTTPParseError) in try parser.finish(into: &events) }
  }

  private mutating func copying(
    _ call: (inout HTTP1Parser, inout CopiedEvents) throws(HTTPParseError) -> Void
  ) throws(HTTPParseError) -> [Event] {
    var events = CopiedEvents()
    try call(&self, &events)
    return events.list
  }
}

/// Where the parser puts what it finds, in order, as it finds it.
protocol HTTP1EventSink {
  /// Whether body bytes are kept after `appendBody` returns (lent, not
  /// copied): the parser then keeps the buffer they lie in alive.
  static var borrowsBody: Bool { get }
  /// A head or the end of a message (never `.body`), moved in.
  mutating func append(_ event: consuming HTTP1Parser.Event)
  /// Body bytes where they lie (see `HTTP1Parser.BorrowedEvent`).
  mutating func appendBody(_ bytes: UnsafeRawBufferPointer)
}

/// Events with bodies copied into arrays of their own: for callers that
/// hold events past the input (a client's requests, which may wait for
/// their upstream; tests). Reusable: `removeAll` keeps the list's storage.
public struct CopiedEvents: HTTP1EventSink {
  public private(set) var list: [HTTP1Parser.Event] = []
  public init() {}
  public static var borrowsBody: Bool { false }
  public mutating func removeAll() { emptyKeepingStorage(&list) }
  public mutating func append(_ event: consuming HTTP1Parser.Event) { list.append(event) }
  public mutating func appendBody(_ bytes: UnsafeRawBufferPointer) { list.append(.body(Array(bytes))) }

}

/// Events with body bytes lent, in a list reused from read to read: the
/// response path's sink, which allocates nothing once warm.
public struct BorrowedEvents: HTTP1EventSink {
  public private(set) var list: [HTTP1Parser.BorrowedEvent] = []
  public init() {}
  public static var borrowsBody: Bool { true }
  public var isEmpty: Bool { list.isEmpty }
  public mutating func removeAll() { emptyKeepingStorage(&list) }

  public mutating func append(_ event: consuming HTTP1Parser.Event) {
    switch consume event {
    case .request(let head): list.append(.request(head))
    case .response(let head): list.append(.response(head))
    case .body(let bytes): preconditionFailure("body of \(bytes.count) bytes as a copied event")
    case .end(let trailers): list.append(.end(trailers: trailers))
    }
  }

  public mutating func appendBody(_ bytes: UnsafeRawBufferPointer) { list.append(.body(bytes)) }

  /// Empties the list as `removeAll` does, a response head's storage
  /// handed back to `parser` for its next head on the way: each event is
  /// moved out of the list, so the head is neither copied nor retained to
  /// be recycled (iterating the list copied every event).
  public mutating func removeAll(recyclingHeadsInto parser: inout HTTP1Parser) {
    guard !list.isEmpty else { return }
    guard list.capacity <= 64 else {
      for case .response(let head) in list { parser.recycle(head.headers) }
      return list = []
    }
    while let event = list.popLast() {
      if case .response(let head) = consume event { parser.recycle(head.headers) }
    }
  }
}

/// A machine's queue of events as the parser's sink: bodies copied (a body
/// may wait there for its upstream).
extension RingBuffer: HTTP1EventSink where Element == HTTP1Parser.Event {
  static var borrowsBody: Bool { false }
  mutating func appendBody(_ bytes: UnsafeRawBufferPointer) { append(.body(Array(bytes))) }
}

/// Empties a sink's list for the next read, keeping its storage unless it
/// grew past 64 events. Element by element, with the element type's own
/// destroy: `Array.removeAll(keepingCapacity:)` destroys through the type's
/// metadata, about 280 instructions a call even for a short list (two calls
/// per response), and an empty list costs nothing.
@inline(__always)
func emptyKeepingStorage<Element>(_ list: inout [Element]) {
  guard !list.isEmpty else { return }
  guard list.capacity <= 64 else { return list = [] }
  while list.popLast() != nil {}
}
