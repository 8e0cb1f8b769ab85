import Foundation
import PinTestSupport
import XCTest

/// A file that is not what its flag takes is a
/// usage error (exit 2) naming the flag, the file and what it should hold,
/// never a verdict; configuration errors say what is wrong without empty
/// fields, suggest the key meant, and put the cause before its consequence.
final class CommandInputTests: XCTestCase {
  var directory = ""

  override func setUpWithError() throws {
    directory =
      FileManager.default.temporaryDirectory.appendingPathComponent("inputs-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

  func write(_ name: String, _ bytes: [UInt8]) throws -> String {
    let path = directory + "/" + name
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
  }

  /// 300 random bytes, a text file and an empty file: what a wrong path
  /// usually points at.
  func junk() throws -> [String] {
    var random = [UInt8](repeating: 0, count: 300)
    for index in random.indices { random[index] = UInt8.random(in: 0...255) }
    // Not by chance the start of a list of that very length.
    random[0] = 0xff
    return [
      try write("random.bin", random), try write("notes.txt", Array("hello, these are notes\n".utf8)),
      try write("empty", []), directory + "/missing.pem", directory,
    ]
  }

  func assertUsage(
    _ arguments: [String], flag: String, file: String, expected: String,
    _ message: String = "", line: UInt = #line
  ) throws {
    let result = try Subprocess.pinproxy(arguments)
    let context = "\(arguments.joined(separator: " ")) \(message)\n\(result.stdout)\(result.stderr)"
    XCTAssertEqual(result.status, 2, context, line: line)
    XCTAssertEqual(result.stdout, "", "no verdict or output: \(context)", line: line)
    XCTAssertTrue(result.stderr.hasPrefix("pinproxy: \(flag) \(file): "), context, line: line)
    XCTAssertTrue(result.stderr.contains("; expected \(expected)"), context, line: line)
  }

  func testSCTFilesThatAreNotSCTListsAreUsageErrorsNotACtRequiredVerdict() throws {
    let base = [
      "evaluate", "--host", "ct.httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem"), "--anchors",
      Fixtures.path("root-a.pem"), "--ct-log-list", SCTFixtures.logList, "--at", "2026-06-01T00:00:00Z",
    ]
    let bare = SCTFixtures.path("httpbin-a.sct")
    for file in try junk() + [bare] {
      try assertUsage(
        base + ["--sct-file", file], flag: "--sct-file", file: file,
        expected: "SCTs as a server sends them in the TLS extension: a PEM SERVERINFO FOR CT")
    }
    // One SCT without its list is recognised as such, with the encoding a list needs.
    let result = try Subprocess.pinproxy(base + ["--sct-file", bare])
    XCTAssertTrue(result.stderr.contains(": one bare SCT (v1, log ID "), result.stderr)
    XCTAssertTrue(result.stderr.contains("a list is a 2-byte length"), result.stderr)
    // The same SCT in a list is evidence, and decides.
    let list = try write("one.bin", SCTFixtures.list([SCTFixtures.sct("a")]))
    let decided = try Subprocess.pinproxy(base + ["--sct-file", list, "--minimum-scts", "1"])
    XCTAssertEqual(decided.stdout, "trusted\n", decided.stderr)
  }

  func testEveryFileTakingFlagNamesItselfTheFileAndWhatTheFileShouldHold() throws {
    let chain = Fixtures.path("httpbin-chain.pem")
    let key = Fixtures.path("httpbin.key")
    let signingKey = directory + "/signing.pem"
    XCTAssertEqual(try Subprocess.pinproxy(["pins", "keygen", "--key", signingKey]).status, 0)
    let evaluate = ["evaluate", "--host", "httpbin.org", "--chain"]
    let certificates = "PEM with CERTIFICATE blocks, or one DER certificate"
    let logList = "a CT log list in the browser vendors' JSON"
    let configuration = "a pinproxy configuration (YAML)"
    let sign = ["pins", "sign", "--expires", "2030-01-01"]
    // (arguments before the file, flag, arguments after, what the file should hold)
    let cases: [([String], String, [String], String)] = [
      (evaluate, "--chain", [], "the chain as the server sends it, leaf first: \(certificates)"),
      (evaluate + [chain, "--anchors"], "--anchors", [], "trust anchors: \(certificates)"),
      (evaluate + [chain, "--pinned-certificate"], "--pinned-certificate", [], "a certificate to pin"),
      (evaluate + [chain, "--ct-log-list"], "--ct-log-list", [], logList),
      (["pin"], "pin", [], certificates),
      (sign + ["--key", signingKey, "--cert"], "--cert", [], "the certificate to pin (its leaf first)"),
      (sign + ["--cert", chain, "--key"], "--key", [], "the P-256 signing key in PEM"),
      (["import", "ats", Self.example("Info.plist"), "--ct-log-list"], "--ct-log-list", [], logList),
      (["import", "ats"], "import ats", [], "an Info.plist"),
      (["import", "trustkit"], "import trustkit", [], "a TrustKit configuration"),
      (["import", "android"], "import android", [], "an Android network_security_config.xml"),
    ]
    for (before, flag, after, expected) in cases {
      for file in try junk() where !(flag == "pin" && file.hasSuffix("missing.pem")) {
        // A key where a certificate belongs, and a certificate where a key belongs.
        try assertUsage(before + [file] + after, flag: flag, file: file, expected: expected)
      }
    }
    try assertUsage(
      evaluate + [key], flag: "--chain", file: key, expected: "the chain as the server sends it")
    try assertUsage(
      sign + ["--cert", chain, "--key", chain], flag: "--key", file: chain, expected: "the P-256")
    try assertUsage(sign + ["--cert", chain, "--key", key], flag: "--key", file: key, expected: "the P-256")
    // A configuration file that cannot be read, or is not text, for every command taking one.
    for command in [evaluate + [chain], ["pins", "show"], ["pins", "update"], ["pin", "httpbin.org:443"]] {
      for file in [
        directory + "/missing.yaml", directory, try write("random.yaml", [0xff, 0xfe, 0x00, 0x80]),
      ] {
        try assertUsage(command + ["--config", file], flag: "--config", file: file, expected: configuration)
      }
    }
    // The app's res/raw directory for Android anchors.
    let raw = try Subprocess.pinproxy([
      "import", "android", Self.example("network_security_config.xml"), "--raw", directory + "/nothere",
    ])
    XCTAssertEqual(raw.status, 2, raw.stderr)
    XCTAssertTrue(raw.stderr.hasPrefix("pinproxy: --raw \(directory)/nothere: no such directory"), raw.stderr)
  }

  static func example(_ name: String) -> String { Fixtures.directory + "/import/" + name }

  func testCheckSuggestsTheKeyMeantAndReportsTheCauseNotItsConsequence() throws {
    let pin = Fixtures.certificate("int-a.pem").spkiPin
    let file = try write(
      "typo.yaml",
      Array(
        """
        domains:
          - domain: example.com
            pinningMod: publicKey
            pinnedPublicKeyHashes: ["\(pin)"]
          - domain: example.org
            ValidatesDomainName: false
            colour: blue
        """.utf8))
    let result = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(result.status, 2)
    let lines = result.stderr.split(separator: "\n").map(String.init)
    XCTAssertEqual(lines.count, 3, result.stderr)
    XCTAssertTrue(
      lines[0].hasPrefix(
        "\(file):3:5: domains[0].pinningMod: unknown key; did you mean pinningMode? (expected"),
      result.stderr)
    XCTAssertFalse(
      result.stderr.contains("pinningMode is none"), "the consequence of the typo: \(result.stderr)")
    XCTAssertTrue(
      lines[1].hasPrefix(
        "\(file):6:5: domains[1].ValidatesDomainName: unknown key; did you mean validatesDomainName?"),
      result.stderr)
    XCTAssertTrue(
      lines[2].hasPrefix("\(file):7:5: domains[1].colour: unknown key (expected one of"), result.stderr)
    // Without the typo, pins under mode none are still refused on their own.
    let none = try write(
      "none.yaml", Array("domains:\n  - domain: example.com\n    pinnedPublicKeyHashes: [\"\(pin)\"]\n".utf8))
    let consequence = try Subprocess.pinproxy(["check", "--config", none])
    XCTAssertTrue(
      consequence.stderr.contains("pins are configured but pinningMode is none"), consequence.stderr)
  }

  func testUnreadableConfigsAndYAMLSyntaxErrorsPrintNoEmptyLocationOrKey() throws {
    let missing = directory + "/nonexist.yaml"
    for command in [["check"], ["run"]] {
      let result = try Subprocess.pinproxy(command + ["--config", missing])
      XCTAssertEqual(result.status, 2, result.stderr)
      XCTAssertTrue(result.stderr.contains("cannot read the configuration file: no such file"), result.stderr)
      XCTAssertFalse(result.stderr.contains(":0:0"), result.stderr)
      XCTAssertFalse(result.stderr.contains(": :"), result.stderr)
    }
    let check = try Subprocess.pinproxy(["check", "--config", missing])
    XCTAssertEqual(
      check.stderr,
      "--config \(missing): cannot read the configuration file: no such file; expected \(Self.configuration)\n"
    )
    let broken = try write(
      "broken.yaml", Array("domains:\n  - domain: a.example\n    pinningMode: [publicKey\n".utf8))
    let syntax = try Subprocess.pinproxy(["check", "--config", broken])
    XCTAssertEqual(syntax.status, 2)
    XCTAssertEqual(
      syntax.stderr,
      "\(broken):4:1: YAML syntax error: did not find expected ',' or ']'"
        + " (while parsing a flow sequence at line 3, column 18)\n")
    let text = try write("notes.yaml", Array("just some notes\n".utf8))
    let scalar = try Subprocess.pinproxy(["check", "--config", text])
    XCTAssertTrue(
      scalar.stderr.hasPrefix("\(text):1:1: not a pinproxy configuration: the top level must be a mapping"),
      scalar.stderr)
  }

  static let configuration = "a pinproxy configuration (YAML)"
}
