import Foundation
import PinTestSupport
import XCTest

/// XCTest on Linux makes an instance of every test's class to list the
/// tests, and each `swift test` lists them before it runs any (three times
/// in a test run, twice more under the sanitizers). A stored property of a
/// test class that parses fixtures or starts event loops runs for every
/// test of its class at each listing: such properties had made listing the
/// suite take 10 s of CPU (42 s under ThreadSanitizer). They are `lazy`
/// (made by the test that uses them) or `static`.
final class TestListingTests: XCTestCase {
  /// What a stored property of a test class may not do when it is made
  /// (a fixture's path, the fixtures' clock and the root are free).
  /// (Regex literals: the compiler checks them, so a bad pattern cannot
  /// trap the test process at run time.)
  static var costly: Regex<Substring> {
    #/Fixtures\.(?!path\(|now\b|repositoryRoot)|PolicyHarness\(|EventLoop(?:Group)?\(|Data\(contentsOf|String\(contentsOf/#
  }
  static var member: Regex<(Substring, Substring)> { #/^  (?:let|var) \w+ *(?::[^=]+)?= *(.+)$/# }

  /// "File:line: text" for each costly stored property of a file that
  /// declares an XCTestCase.
  static func costlyProperties(in source: String, file: String) -> [String] {
    guard source.contains(": XCTestCase") else { return [] }
    var found: [String] = []
    for (index, line) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      let text = String(line)
      guard let match = text.firstMatch(of: member), match.1.contains(costly) else { continue }
      found.append("\(file):\(index + 1): \(text.trimmingCharacters(in: .whitespaces))")
    }
    return found
  }

  func testNoTestClassDoesCostlyWorkWhenItIsMade() throws {
    let root = Fixtures.repositoryRoot + "/Tests"
    let files = try XCTUnwrap(FileManager.default.subpathsOfDirectory(atPath: root)).filter {
      $0.hasSuffix(".swift") && !$0.hasSuffix("TestListingTests.swift")
    }
    XCTAssertGreaterThan(files.count, 100, "the scan found too few test files")
    var found: [String] = []
    for file in files {
      found += Self.costlyProperties(
        in: try String(contentsOfFile: root + "/" + file, encoding: .utf8), file: file)
    }
    XCTAssertEqual(found, [], "make these `lazy var` (or `static let`): every listing of the tests made them")
  }

  /// The check sees what it must: a fixture parsed in a stored property is
  /// caught; a lazy one, a static one, a cheap value or a local is not.
  func testTheCheckCatchesACostlyStoredProperty() {
    let source = [
      "final class ATests: XCTestCase {",
      "  let harness = PolicyHarness()",
      "  let chain = Fixtures.chain(\"a.pem\")",
      "  lazy var leaf = Fixtures.certificate(\"b.pem\")",
      "  static let root = Fixtures.certificate(\"c.pem\")",
      "  let now = Date(timeIntervalSince1970: 0)",
      "  let file = Fixtures.path(\"d.pem\")",
      "  func testA() {",
      "    let group = EventLoopGroup(count: 1)",
      "  }",
      "}",
    ].joined(separator: "\n")
    XCTAssertEqual(
      Self.costlyProperties(in: source, file: "A.swift"),
      ["A.swift:2: let harness = PolicyHarness()", "A.swift:3: let chain = Fixtures.chain(\"a.pem\")"])
    XCTAssertEqual(
      Self.costlyProperties(
        in: "struct Helper {\n  let group = EventLoopGroup(count: 1)\n}", file: "B.swift"), [])
  }
}
