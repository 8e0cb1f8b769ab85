import PinHTTP
import XCTest

/// Feeds a message whole, split in two at every position, and byte by byte,
/// and requires the same outcome each time. Body events are merged so that
/// only the bytes, not how they were cut, are compared. Each split is fed
/// three times: as arrays, through one reused buffer (as a socket
/// delivers), and through that buffer into a `BorrowedEvents` sink whose
/// lent body bytes are read before the next read overwrites them (as the
/// upstream path takes them).
enum SplitFeeding {
  enum Outcome: Equatable {
    case events([HTTP1Parser.Event])
    case failure(HTTPParseError.Kind)
  }

  static func feed(
    _ pieces: [[UInt8]], role: HTTP1Parser.Role, limits: HTTPLimits, method: String?, finish: Bool,
    throughReusedBuffer: Bool = false, borrowing: Bool = false
  )
    -> Outcome
  {
    var parser = HTTP1Parser(role: role, limits: limits)
    if let method { parser.expectResponse(to: method) }
    var events: [HTTP1Parser.Event] = []
    let reused = UnsafeMutableRawBufferPointer.allocate(
      byteCount: max(1, pieces.map(\.count).max() ?? 0), alignment: 1)
    defer { reused.deallocate() }
    do {
      for piece in pieces {
        guard throughReusedBuffer else {
          events += try parser.feed(piece)
          continue
        }
        piece.withUnsafeBytes { reused.copyMemory(from: $0) }
        let read = UnsafeRawBufferPointer(rebasing: reused[..<piece.count])
        if borrowing {
          var sink = BorrowedEvents()
          try parser.feed(read, into: &sink)
          events += owned(sink.list)
        } else {
          events += try parser.feed(read)
        }
        // The next read overwrites the buffer: a parser that kept a pointer
        // into it instead of the bytes would now see this.
        reused.initializeMemory(as: UInt8.self, repeating: 0xa5)
      }
      if finish && borrowing {
        var sink = BorrowedEvents()
        try parser.finish(into: &sink)
        events += owned(sink.list)
      } else if finish {
        events += try parser.finish()
      }
    } catch {
      return .failure(error.kind)
    }
    return .events(merge(events))
  }

  /// Array and reused-buffer feeding of the same pieces agree, and the outcome is returned.
  static func agreed(
    _ pieces: [[UInt8]], role: HTTP1Parser.Role, limits: HTTPLimits, method: String?, finish: Bool,
    _ what: String, file: StaticString, line: UInt
  ) -> Outcome {
    let fromArrays = feed(pieces, role: role, limits: limits, method: method, finish: finish)
    let fromBuffer = feed(
      pieces, role: role, limits: limits, method: method, finish: finish, throughReusedBuffer: true)
    XCTAssertEqual(
      fromBuffer, fromArrays, "\(what): buffer feed differs from array feed", file: file, line: line)
    let borrowed = feed(
      pieces, role: role, limits: limits, method: method, finish: finish, throughReusedBuffer: true,
      borrowing: true)
    XCTAssertEqual(
      borrowed, fromArrays, "\(what): lent body bytes differ from copied ones", file: file, line: line)
    return fromArrays
  }

  /// Lent events as owned ones, body bytes copied while they are valid.
  static func owned(_ lent: [HTTP1Parser.BorrowedEvent]) -> [HTTP1Parser.Event] {
    lent.map { event in
      switch event {
      case .request(let head): .request(head)
      case .response(let head): .response(head)
      case .body(let bytes): .body(Array(bytes))
      case .end(let trailers): .end(trailers: trailers)
      }
    }
  }

  static func merge(_ events: [HTTP1Parser.Event]) -> [HTTP1Parser.Event] {
    var merged: [HTTP1Parser.Event] = []
    for event in events {
      if case .body(let bytes) = event, case .body(let previous)? = merged.last {
        merged[merged.count - 1] = .body(previous + bytes)
      } else if case .body(let bytes) = event, bytes.isEmpty {
        continue
      } else {
        merged.append(event)
      }
    }
    return merged
  }

  /// The outcome, after checking that every split agrees with it.
  static func outcome(
    _ text: String, role: HTTP1Parser.Role = .request, limits: HTTPLimits = HTTPLimits(),
    method: String? = nil,
    finish: Bool = false, file: StaticString = #filePath, line: UInt = #line
  ) -> Outcome {
    let bytes = Array(text.utf8)
    let whole = agreed(
      [bytes], role: role, limits: limits, method: method, finish: finish, "whole", file: file, line: line)
    for cut in 0...bytes.count {
      let split = agreed(
        [Array(bytes[..<cut]), Array(bytes[cut...])], role: role, limits: limits, method: method,
        finish: finish, "split at \(cut)", file: file, line: line)
      XCTAssertEqual(split, whole, "split at \(cut)", file: file, line: line)
      if split != whole { break }
    }
    let single = agreed(
      bytes.map { [$0] }, role: role, limits: limits, method: method, finish: finish, "byte by byte",
      file: file,
      line: line)
    XCTAssertEqual(single, whole, "byte by byte", file: file, line: line)
    return whole
  }
}
