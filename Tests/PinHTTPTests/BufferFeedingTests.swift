import PinHTTP
import XCTest

/// `feed(_: UnsafeRawBufferPointer)` is what a channel's reused read buffer
/// goes through: the events must be the ones the array feed gives, and
/// nothing may point into the buffer once the call returned.
final class BufferFeedingTests: XCTestCase {
  /// One scratch buffer for every read, scribbled over after each, as the
  /// loop's read buffer is by the next read.
  struct ReusedBuffer {
    let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 1)

    func feed(_ bytes: [UInt8], to parser: inout HTTP1Parser) throws -> [HTTP1Parser.Event] {
      bytes.withUnsafeBytes { storage.copyMemory(from: $0) }
      defer { storage.initializeMemory(as: UInt8.self, repeating: 0xa5) }
      return try parser.feed(UnsafeRawBufferPointer(rebasing: storage[..<bytes.count]))
    }

    func release() { storage.deallocate() }
  }

  static let chunked = Array(
    ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      + "5\r\nhello\r\n1;ext=1\r\n \r\n10\r\n0123456789abcdef\r\n0\r\nX-Sum: 1\r\n\r\n").utf8)
  static let sized = Array("HTTP/1.1 200 OK\r\nContent-Length: 26\r\n\r\nabcdefghijklmnopqrstuvwxyz".utf8)

  func arrayOutcome(_ bytes: [UInt8]) throws -> [HTTP1Parser.Event] {
    var parser = HTTP1Parser(role: .response)
    return try parser.feed(bytes)
  }

  func testAWholeMessageGivesExactlyTheArrayFeedsEvents() throws {
    let reused = ReusedBuffer()
    defer { reused.release() }
    for message in [Self.chunked, Self.sized] {
      var parser = HTTP1Parser(role: .response)
      XCTAssertEqual(try reused.feed(message, to: &parser), try arrayOutcome(message))
      XCTAssertEqual(parser.bufferedByteCount, 0)
    }
  }

  /// Every cut into three reads, through the reused buffer.
  func testEveryThreeWaySplitAgreesWithTheWholeMessage() throws {
    let reused = ReusedBuffer()
    defer { reused.release() }
    for message in [Self.chunked, Self.sized] {
      let whole = SplitFeeding.merge(try arrayOutcome(message))
      for first in 0...message.count {
        for second in first...message.count {
          var parser = HTTP1Parser(role: .response)
          var events: [HTTP1Parser.Event] = []
          for piece in [message[..<first], message[first..<second], message[second...]] {
            events += try reused.feed(Array(piece), to: &parser)
          }
          XCTAssertEqual(SplitFeeding.merge(events), whole, "cut at \(first) and \(second)")
        }
      }
    }
  }

  /// A head cut in two, the second read carrying the rest of it and the
  /// body: the body still arrives as one event, taken from the read.
  func testABodyAfterASplitHeadArrivesWhole() throws {
    let reused = ReusedBuffer()
    defer { reused.release() }
    let body = [UInt8](repeating: 0x62, count: 40_000)
    let message = Array("HTTP/1.1 200 OK\r\nContent-Length: 40000\r\nServer: x\r\n\r\n".utf8) + body
    var parser = HTTP1Parser(role: .response)
    XCTAssertEqual(try reused.feed(Array(message[..<20]), to: &parser), [])
    let events = try reused.feed(Array(message[20...]), to: &parser)
    XCTAssertEqual(events.count, 3)
    XCTAssertEqual(events.dropFirst().first, .body(body))
    XCTAssertEqual(events.last, .end(trailers: HTTPHeaders()))
    XCTAssertEqual(parser.bufferedByteCount, 0)
  }

  /// What a pausing parser keeps (the next pipelined request) and what
  /// follows a CONNECT are copies, valid after the buffer is reused.
  func testKeptBytesSurviveTheBuffersReuse() throws {
    let reused = ReusedBuffer()
    defer { reused.release() }
    var pausing = HTTP1Parser(role: .request, pausesBetweenMessages: true)
    let two = Array("GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
    XCTAssertEqual(try reused.feed(two, to: &pausing).count, 2)
    let second = try pausing.resume()
    guard case .request(let head)? = second.first else { return XCTFail("no second request: \(second)") }
    XCTAssertEqual(head.rawTarget, "/2")

    var connect = HTTP1Parser(role: .request)
    let tunnel = Array("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n\u{16}\u{03}\u{01}".utf8)
    XCTAssertEqual(try reused.feed(tunnel, to: &connect).count, 1)
    XCTAssertEqual(try reused.feed([0x02], to: &connect), [])
    XCTAssertEqual(connect.takeLeftover(), [0x16, 0x03, 0x01, 0x02])
  }

  func testAMalformedReadFailsAsTheArrayFeedDoes() throws {
    let reused = ReusedBuffer()
    defer { reused.release() }
    var parser = HTTP1Parser(role: .response)
    let bad = Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8)
    XCTAssertThrowsError(try reused.feed(bad, to: &parser)) { error in
      XCTAssertEqual((error as? HTTPParseError)?.kind, .badRequest)
    }
    XCTAssertThrowsError(
      try reused.feed(Array("0\r\n\r\n".utf8), to: &parser), "a failed parser stays failed")
  }
}
