import PinHTTP
import XCTest

/// Feeds a message whole, split in two at every position, and byte by byte,
/// and requires the same outcome each time. Body events are merged so that
/// only the bytes, not how they were cut, are compared.
enum SplitFeeding {
  enum Outcome: Equatable {
    case events([HTTP1Parser.Event])
    case failure(HTTPParseError.Kind)
  }

  static func feed(
    _ pieces: [[UInt8]], role: HTTP1Parser.Role, limits: HTTPLimits, method: String?, finish: Bool
  )
    -> Outcome
  {
    var parser = HTTP1Parser(role: role, limits: limits)
    if let method { parser.expectResponse(to: method) }
    var events: [HTTP1Parser.Event] = []
    do {
      for piece in pieces { events += try parser.feed(piece) }
      if finish { events += try parser.finish() }
    } catch {
      return .failure(error.kind)
    }
    return .events(merge(events))
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
    let whole = feed([bytes], role: role, limits: limits, method: method, finish: finish)
    for cut in 0...bytes.count {
      let split = feed(
        [Array(bytes[..<cut]), Array(bytes[cut...])], role: role, limits: limits, method: method,
        finish: finish)
      XCTAssertEqual(split, whole, "split at \(cut)", file: file, line: line)
      if split != whole { break }
    }
    let single = feed(bytes.map { [$0] }, role: role, limits: limits, method: method, finish: finish)
    XCTAssertEqual(single, whole, "byte by byte", file: file, line: line)
    return whole
  }
}
