import Foundation
import PinTestSupport
import PinTrust
import XCTest

/// `pinproxy evaluate` as a user runs it: the real binary, real files, exit codes.
final class EvaluateCommandTests: XCTestCase {
  let at = ["--at", "2026-06-01T00:00:00Z"]

  func evaluate(_ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
    try Subprocess.pinproxy(["evaluate"] + arguments + at, environment: environment)
  }

  func testTrustedChainPrintsTrustedAndExitsZero() throws {
    let result = try evaluate([
      "--host", "httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem"), "--anchors",
      Fixtures.path("root-a.pem"),
    ])
    XCTAssertEqual(result.stdout, "trusted\n")
    XCTAssertEqual(result.status, 0)
  }

  func testRejectionPrintsCodeAndReasonAndExitsOne() throws {
    let result = try evaluate([
      "--host", "apple.com", "--chain", Fixtures.path("httpbin-chain.pem"), "--anchors",
      Fixtures.path("root-a.pem"),
    ])
    XCTAssertEqual(result.status, 1)
    XCTAssertTrue(result.stdout.hasPrefix("rejected: hostname-mismatch: leaf CN=httpbin.org"), result.stdout)
  }

  func testSystemAnchorsHonourSSLCertFile() throws {
    let arguments = ["--host", "httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem")]
    let withRoot = try evaluate(
      arguments, environment: ["SSL_CERT_FILE": Fixtures.path("root-a.pem"), "SSL_CERT_DIR": "/nonexistent"])
    XCTAssertEqual(withRoot.stdout, "trusted\n")
    let withOtherRoot = try evaluate(
      arguments, environment: ["SSL_CERT_FILE": Fixtures.path("root-b.pem"), "SSL_CERT_DIR": "/nonexistent"])
    XCTAssertTrue(withOtherRoot.stdout.hasPrefix("rejected: untrusted-chain:"), withOtherRoot.stdout)
  }

  func testPublicKeyPinFlagsAndAllowInvalidExplainWhatWasWaived() throws {
    let pin = Fixtures.certificate("int-a.pem").spkiPin
    let result = try evaluate([
      "--host", "expired.httpbin.org", "--chain", Fixtures.path("expired-chain.pem"), "--anchors",
      Fixtures.path("root-a.pem"),
      "--pinning-mode", "publicKey", "--pinned-public-key-hash", pin, "--allow-invalid-certificates",
      "--no-validates-domain-name",
    ])
    XCTAssertEqual(result.stdout, "trusted\n")
    XCTAssertTrue(result.stderr.contains("accepted despite: certificate has expired"), result.stderr)
  }

  func testCertificatePinningWithPinnedFile() throws {
    let base = [
      "--chain", Fixtures.path("httpbin-chain.pem"), "--pinning-mode", "certificate", "--anchors",
      Fixtures.path("root-a.pem"),
    ]
    let pinned = try evaluate(
      ["--host", "httpbin.org", "--pinned-certificate", Fixtures.path("int-a.der")] + base)
    XCTAssertEqual(pinned.stdout, "trusted\n")
    let wrong = try evaluate(
      ["--host", "httpbin.org", "--pinned-certificate", Fixtures.path("int-b.pem")] + base)
    XCTAssertTrue(wrong.stdout.hasPrefix("rejected: pin-mismatch:"), wrong.stdout)
  }

  func testNoHostEvaluatesWithoutAHostCheck() throws {
    let result = try evaluate([
      "--no-host", "--chain", Fixtures.path("httpbin-chain.pem"), "--anchors", Fixtures.path("root-a.pem"),
    ])
    XCTAssertEqual(result.stdout, "trusted\n")
  }

  func testAtMovesTheClock() throws {
    let arguments = [
      "evaluate", "--host", "httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem"), "--anchors",
      Fixtures.path("root-a.pem"),
    ]
    let later = try Subprocess.pinproxy(arguments + ["--at", "2036-01-01T00:00:00Z"])
    XCTAssertTrue(later.stdout.hasPrefix("rejected: expired:"), later.stdout)
  }

  func testConfigRuleIsChosenByHost() throws {
    let config = Fixtures.repositoryRoot + "/config/pinproxy.yaml"
    let chain = Fixtures.repositoryRoot + "/config/examples/api.bank.example-chain.pem"
    let allowed = try evaluate(["--config", config, "--host", "api.bank.example", "--chain", chain])
    XCTAssertEqual(allowed.stdout, "trusted\n")
    let other = try evaluate(["--config", config, "--host", "example.com", "--chain", chain])
    XCTAssertTrue(other.stdout.hasPrefix("rejected: untrusted-chain:"), other.stdout)
  }

  func testConfigWithAnUnknownAnchorSetIsAUsageErrorNamingIt() throws {
    let temporary = try TemporaryFile(
      "domains:\n  - domain: httpbin.org\n    anchors: [nationl]\n", suffix: ".yaml")
    defer { temporary.remove() }
    let file = temporary.path
    let result = try evaluate([
      "--config", file, "--host", "httpbin.org", "--chain", Fixtures.path("httpbin-chain.pem"),
    ])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(
      result.stderr.contains("\(file):3:14: domains[0].anchors: unknown anchor set \"nationl\""),
      result.stderr)
  }

  func testUsageAndInputErrorsExitTwoWithAClearMessage() throws {
    let chain = Fixtures.path("httpbin-chain.pem")
    let cases: [([String], String)] = [
      (["--chain", chain], "--host HOST is required"),
      (["--host", "a.example", "--chain", "/nonexistent.pem"], "/nonexistent.pem: no such file"),
      (["--host", "a.example", "--chain", Fixtures.path("httpbin.key")], "no CERTIFICATE"),
      (
        ["--host", "a.example", "--chain", chain, "--pinned-public-key-hash", "sha256/AAAA"],
        "not standard base64"
      ),
      (["--host", "a.example", "--chain", chain, "--pinning-mode", "strict"], "--pinning-mode must be"),
      (
        ["--host", "a.example", "--chain", chain, "--pinned-certificate", Fixtures.path("httpbin.key")],
        "httpbin.key"
      ),
      (["--host", "a..example", "--chain", chain], "is not a host name"),
      (
        ["--host", "a.example", "--chain", chain, "--config", "/x.yaml", "--allow-invalid-certificates"],
        "exclude each other"
      ),
    ]
    for (arguments, message) in cases {
      let result = try Subprocess.pinproxy(["evaluate"] + arguments)
      XCTAssertEqual(result.status, 2, "\(arguments): \(result.stdout)\(result.stderr)")
      XCTAssertTrue(result.stderr.contains(message), "\(arguments): \(result.stderr)")
      XCTAssertEqual(result.stdout, "", "nothing on stdout for \(arguments)")
    }
  }
}
