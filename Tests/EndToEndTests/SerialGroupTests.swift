import Foundation
import PinTestSupport
import XCTest

/// scripts/test.sh runs the tests in parallel except those Tests/serial-tests.txt
/// names. A test that measures a child's memory or CPU beside other tests would
/// measure them too, so each one must be named there.
final class SerialGroupTests: XCTestCase {
  /// What a test calls when it measures a process rather than its answers.
  let measurements = ["residentKiB", "peakResidentKiB", "residentKilobytes", "cpuSeconds("]

  func testEveryTestThatMeasuresMemoryOrCPURunsAlone() throws {
    let patterns = try serialPatterns()
    XCTAssertFalse(patterns.isEmpty)
    var measuring: [String] = []
    for (module, file) in try testSources() {
      for (type, name, body) in testFunctions(in: file)
      where measurements.contains(where: body.contains) {
        measuring.append("\(module).\(type)/\(name)")
      }
    }
    XCTAssertGreaterThanOrEqual(measuring.count, 6, "the scan found too few measuring tests: \(measuring)")
    for test in measuring {
      let range = NSRange(test.startIndex..., in: test)
      XCTAssertTrue(
        patterns.contains { $0.firstMatch(in: test, range: range) != nil },
        "\(test) measures memory or CPU but Tests/serial-tests.txt does not name it")
    }
  }

  func testEverySerialPatternNamesATestThatExists() throws {
    let names = try testSources().flatMap { module, file in
      testFunctions(in: file).map { "\(module).\($0.type)/\($0.name)" }
    }
    for pattern in try serialPatterns() {
      XCTAssertTrue(
        names.contains { pattern.firstMatch(in: $0, range: NSRange($0.startIndex..., in: $0)) != nil },
        "Tests/serial-tests.txt: \(pattern.pattern) matches no test")
    }
  }

  func serialPatterns() throws -> [NSRegularExpression] {
    let text = try String(
      contentsOfFile: Fixtures.repositoryRoot + "/Tests/serial-tests.txt", encoding: .utf8)
    return try text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && !$0.hasPrefix("#") }
      .map { try NSRegularExpression(pattern: $0) }
  }

  /// (test module, file text) of every Swift file of a test target.
  func testSources() throws -> [(String, String)] {
    let root = Fixtures.repositoryRoot + "/Tests"
    var sources: [(String, String)] = []
    for module in try FileManager.default.contentsOfDirectory(atPath: root) where module.hasSuffix("Tests") {
      for file in try FileManager.default.contentsOfDirectory(atPath: root + "/" + module)
      where file.hasSuffix(".swift") {
        sources.append((module, try String(contentsOfFile: "\(root)/\(module)/\(file)", encoding: .utf8)))
      }
    }
    return sources
  }

  /// Each `func test…` with the class or extension it sits in and its text up
  /// to the next function or type.
  func testFunctions(in file: String) -> [(type: String, name: String, body: String)] {
    var found: [(type: String, name: String, body: String)] = []
    var type = ""
    var current: (name: String, body: String)?
    for line in file.split(separator: "\n", omittingEmptySubsequences: false) {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      let words = trimmed.split(separator: " ")
      let opensType =
        (words.first == "final" && words.dropFirst().first == "class") || words.first == "class"
        || words.first == "extension"
      if opensType || trimmed.hasPrefix("func ") || trimmed.hasPrefix("private func ") {
        if let test = current { found.append((type, test.name, test.body)) }
        current = nil
      }
      if opensType, let index = words.firstIndex(where: { $0 == "class" || $0 == "extension" }),
        index + 1 < words.count
      {
        type = String(words[index + 1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
      } else if trimmed.hasPrefix("func test"), let open = trimmed.firstIndex(of: "(") {
        current = (String(trimmed[trimmed.index(trimmed.startIndex, offsetBy: 5)..<open]), "")
      } else if current != nil {
        current!.body += line + "\n"
      }
    }
    if let test = current { found.append((type, test.name, test.body)) }
    return found
  }
}
