import XCTest

@testable import PinHTTP

/// The response path takes body bytes lent, not copied: a body piece is the
/// read's own bytes, and bytes the parser had kept stay valid until it is
/// next called.
final class LentBodyTests: XCTestCase {
  func testABodyInTheReadIsLentFromItNotCopied() throws {
    let message = Array("HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world".utf8)
    var parser = HTTP1Parser(role: .response)
    var sink = BorrowedEvents()
    try message.withUnsafeBytes { read in
      try parser.feed(read, into: &sink)
      XCTAssertEqual(sink.list.count, 3)
      guard case .body(let body) = sink.list[1] else { return XCTFail("no body event: \(sink.list)") }
      XCTAssertEqual(Array(body), Array("hello world".utf8))
      let offset = try XCTUnwrap(body.baseAddress) - XCTUnwrap(read.baseAddress)
      XCTAssertEqual(offset, message.count - 11, "the body lies where it was read")
    }
  }

  func testChunkedPiecesAreLentFromTheReadAcrossSplits() throws {
    let message = Array(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".utf8)
    for cut in 1..<message.count {
      var parser = HTTP1Parser(role: .response)
      var body: [UInt8] = []
      var ended = false
      for piece in [message[..<cut], message[cut...]] {
        let read = Array(piece)
        try read.withUnsafeBytes { raw in
          var sink = BorrowedEvents()
          try parser.feed(raw, into: &sink)
          for case .body(let bytes) in sink.list {
            let start = try XCTUnwrap(bytes.baseAddress)
            XCTAssertTrue(
              start >= raw.baseAddress! && start + bytes.count <= raw.baseAddress! + raw.count,
              "cut at \(cut): a chunk's bytes lie in the read")
            body += bytes
          }
          for case .end in sink.list { ended = true }
        }
      }
      XCTAssertEqual(String(decoding: body, as: UTF8.self), "hello world", "cut at \(cut)")
      XCTAssertTrue(ended, "cut at \(cut)")
    }
  }

  /// A head that arrives in pieces is completed a line at a time from the
  /// parser's buffer; nothing of it is lent, so no line's storage is held
  /// (holding each would keep, and copy, the head again per line).
  func testAHeadCompletedLineByLineHoldsNoStorage() throws {
    var parser = HTTP1Parser(role: .response)
    var sink = BorrowedEvents()
    try Array("HTTP/1.1 200 OK\r\nX-A: 1".utf8).withUnsafeBytes { try parser.feed($0, into: &sink) }
    var rest = "\r\n"
    for index in 0..<60 { rest += "X-\(index): v\r\n" }
    rest += "Content-Length: 2\r\n\r\nok"
    try Array(rest.utf8).withUnsafeBytes { read in
      try parser.feed(read, into: &sink)
      XCTAssertTrue(parser.lent.isEmpty, "\(parser.lent.count) buffers held")
      guard case .body(let body) = sink.list.dropFirst().first else { return XCTFail("\(sink.list)") }
      XCTAssertEqual(Array(body), Array("ok".utf8))
    }
  }

  /// A pausing parser keeps the second response; after `resume` its body
  /// is lent from the parser's buffer, valid after the call returns.
  func testBytesKeptBetweenMessagesAreLentUntilTheNextCall() throws {
    let two = Array(
      "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwxyz".utf8)
    var parser = HTTP1Parser(role: .response, pausesBetweenMessages: true)
    var first = BorrowedEvents()
    try two.withUnsafeBytes { try parser.feed($0, into: &first) }
    XCTAssertTrue(parser.isPaused)
    var second = BorrowedEvents()
    try parser.resume(into: &second)
    XCTAssertEqual(parser.lent.count, 1, "the kept buffer the body was lent from is held")
    let bodies = second.list.compactMap { event -> [UInt8]? in
      if case .body(let bytes) = event { Array(bytes) } else { nil }
    }
    XCTAssertEqual(bodies, [Array("wxyz".utf8)])
  }
}
