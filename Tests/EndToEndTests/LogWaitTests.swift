import Foundation
import PinTestSupport
import XCTest

/// The daemon writes its log lines from a background thread, after the
/// client has its answer: a test that asserts a line right after a request
/// passes alone and fails under load. So an end-to-end test reads the log
/// (`completeLogLines`, `log`, `logLines(…)`) to assert on it only inside a
/// wait (`ProxyProcess.waitForLine`, `ChildProcess.wait(for:)`,
/// `eventually`) or after one in the same test; as a failure message, or in
/// a negative assertion, it may read it at any time.
final class LogWaitTests: XCTestCase {
  // Regex literals: the compiler checks them, so a bad pattern cannot
  // trap the test process at run time.
  static var read: Regex<Substring> {
    #/completeLogLines|\b(?:proxy|process|daemon|child)!?\??\.log\b|logLines\(/#
  }
  static var wait: Regex<Substring> { #/wait\(for|waitForLine|eventually/# }
  static var assertion: Regex<Substring> {
    #/XCTAssert(?:True|Equal|GreaterThan|GreaterThanOrEqual|LessThan)\(|\blet \w+ = /#
  }

  static func matches(_ pattern: Regex<Substring>, _ text: String) -> Bool { text.contains(pattern) }

  /// The first argument of the assertion starting at `start` (or the rest
  /// of the line of a `let`).
  static func firstArgument(_ body: String, from start: String.Index, isLet: Bool) -> String {
    if isLet { return String(body[start...].prefix { $0 != "\n" }) }
    var depth = 1
    var argument = ""
    for character in body[start...] {
      switch character {
      case "(", "[", "{": depth += 1
      case ")", "]", "}":
        depth -= 1
        if depth == 0 { return argument }
      case "," where depth == 1: return argument
      default: break
      }
      argument.append(character)
    }
    return argument
  }

  /// "File:line: text" for every read of the log asserted before any wait.
  static func unwaitedReads(in source: String, file: String) -> [String] {
    var found: [String] = []
    let functionStarts =
      source.ranges(of: "\n  func ").map(\.lowerBound)
      + source.ranges(of: "\n  private func ").map(\.lowerBound)
    let bounds = (functionStarts.sorted() + [source.endIndex])
    for (start, end) in zip(bounds, bounds.dropFirst()) {
      let body = String(source[start..<end])
      for match in body.matches(of: assertion) {
        let matched = match.range
        let argument = firstArgument(body, from: matched.upperBound, isLet: body[matched].hasPrefix("let"))
        guard matches(read, argument), !matches(wait, argument),
          !matches(wait, String(body[..<matched.lowerBound]))
        else { continue }
        let line =
          source[..<start].filter { $0 == "\n" }.count
          + body[..<matched.lowerBound].filter { $0 == "\n" }.count + 1
        found.append(
          "\(file):\(line): \(argument.trimmingCharacters(in: .whitespacesAndNewlines).prefix(80))")
      }
    }
    return found
  }

  func testEveryLogLineIsAssertedAfterWaitingForIt() throws {
    let directory = Fixtures.repositoryRoot + "/Tests/EndToEndTests"
    let files = try FileManager.default.contentsOfDirectory(atPath: directory).filter {
      $0.hasSuffix(".swift")
    }
    XCTAssertGreaterThan(files.count, 40, "the scan found too few test files")
    var found: [String] = []
    for file in files where file != "LogWaitTests.swift" {
      found += Self.unwaitedReads(
        in: try String(contentsOfFile: directory + "/" + file, encoding: .utf8), file: file)
    }
    XCTAssertEqual(found, [], "assert log lines through ProxyProcess.waitForLine or ChildProcess.wait(for:)")
  }

  /// The check sees what it must: an access line asserted at once is
  /// caught; the same after a wait, as a message or negated is not.
  func testTheCheckCatchesAnUnwaitedRead() {
    // As swift-format lays a test out: `func` two spaces in.
    let caught = [
      "", "  func testA() throws {", "    let result = try get()", "    XCTAssertTrue(",
      "      proxy!.completeLogLines.contains { $0.contains(\" request \") }, proxy!.log)", "  }",
    ].joined(separator: "\n")
    XCTAssertEqual(Self.unwaitedReads(in: caught, file: "A.swift").count, 1)
    let fine = [
      "", "  func testB() throws {", "    XCTAssertEqual(result.status, 200, proxy!.log)",
      "    XCTAssertFalse(proxy!.log.contains(\"password\"))",
      "    XCTAssertTrue(proxy!.waitForLine { $0.contains(\" request \") }, proxy!.log)",
      "    let lines = proxy!.completeLogLines.filter { $0.contains(\" request \") }", "  }",
    ].joined(separator: "\n")
    XCTAssertEqual(Self.unwaitedReads(in: fine, file: "B.swift"), [])
  }
}
