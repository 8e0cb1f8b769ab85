import Foundation
import PinTestSupport
import PinTrust
import XCTest

final class PinAndCheckCommandTests: XCTestCase {
  func testPinFilePrintsEveryCertificate() throws {
    let result = try Subprocess.pinproxy(["pin", Fixtures.path("httpbin-chain.pem")])
    XCTAssertEqual(result.status, 0)
    let leaf = Fixtures.certificate("httpbin.pem")
    XCTAssertTrue(result.stdout.contains("[0] subject:  CN=httpbin.org"), result.stdout)
    XCTAssertTrue(result.stdout.contains("pin:      \(leaf.spkiPin)"), result.stdout)
    XCTAssertTrue(result.stdout.contains("sha256:   \(leaf.fingerprint.hex)"), result.stdout)
    XCTAssertTrue(result.stdout.contains("sha256/base64: \(leaf.fingerprint.base64)"), result.stdout)
    XCTAssertTrue(result.stdout.contains("notAfter: 2035-01-01T00:00:00Z"), result.stdout)
    XCTAssertTrue(result.stdout.contains("[1] subject:  CN=Pinproxy Test Intermediate A"), result.stdout)
  }

  func testPinHostPortPrintsTheChainALiveServerPresents() throws {
    let server = try OpenSSLServer(
      certificate: Fixtures.path("ecdsa.pem"), key: Fixtures.path("ecdsa.key"),
      chain: Fixtures.path("int-a.pem"))
    defer { server.stop() }
    let result = try Subprocess.pinproxy(["pin", "127.0.0.1:\(server.port)"])
    XCTAssertEqual(result.status, 0, result.stderr)
    XCTAssertTrue(
      result.stdout.contains("pin:      \(Fixtures.certificate("ecdsa.pem").spkiPin)"), result.stdout)
    XCTAssertTrue(
      result.stdout.contains("pin:      \(Fixtures.certificate("int-a.pem").spkiPin)"), result.stdout)
    XCTAssertTrue(result.stdout.contains("key:      EC-256"), result.stdout)
  }

  func testPinUnreachableServerFailsClearly() throws {
    let result = try Subprocess.pinproxy(["pin", "127.0.0.1:1"])
    XCTAssertEqual(result.status, 1)
    XCTAssertTrue(result.stderr.contains("cannot connect to 127.0.0.1:1"), result.stderr)
  }

  func testPinRejectsSomethingThatIsNeitherFileNorAddress() throws {
    let result = try Subprocess.pinproxy(["pin", "no-such-file.pem"])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(result.stderr.contains("no such file, and not HOST:PORT"), result.stderr)
  }

  func testCheckAcceptsTheExampleAndListsEveryErrorOfABadConfig() throws {
    let good = try Subprocess.pinproxy([
      "check", "--config", Fixtures.repositoryRoot + "/config/pinproxy.yaml",
    ])
    XCTAssertEqual(good.status, 0, good.stderr)
    let temporary = try TemporaryFile(
      """
      domains:
        - domain: example.com
          pinningMode: pubkey
          colour: blue
        - domain: example.org
          pinningMode: certificate
          pinnedCertificates: [nothere.pem]
      """)
    defer { temporary.remove() }
    let file = temporary.path
    let bad = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(bad.status, 2)
    let lines = bad.stderr.split(separator: "\n")
    XCTAssertEqual(lines.count, 3, bad.stderr)
    XCTAssertTrue(
      lines[0].hasPrefix("\(file):3:18: domains[0].pinningMode: \"pubkey\" is not one of"), bad.stderr)
    XCTAssertTrue(lines[1].hasPrefix("\(file):4:5: domains[0].colour: unknown key"), bad.stderr)
    XCTAssertTrue(lines[2].hasPrefix("\(file):7:26: domains[1].pinnedCertificates[0]: "), bad.stderr)
    XCTAssertTrue(lines[2].hasSuffix("nothere.pem: no such file"), bad.stderr)
  }

  func testBadDynamicPinsAndReportValuesAreNamedByLine() throws {
    let temporary = try TemporaryFile(
      """
      domains:
        - domain: api.example
          dynamicPins:
            url: "ftp://pins.example/list.json"
            publicKey: "BC3k"
            fallback: nothere.json
          report: {uris: ["not a url"]}
      """)
    defer { temporary.remove() }
    let file = temporary.path
    let check = try Subprocess.pinproxy(["check", "--config", file])
    XCTAssertEqual(check.status, 2)
    let lines = check.stderr.split(separator: "\n").map(String.init)
    XCTAssertTrue(lines.contains { $0.hasPrefix("\(file):4:12: domains[0].dynamicPins.url: ") }, check.stderr)
    XCTAssertTrue(
      lines.contains {
        $0.hasPrefix("\(file):5:18: domains[0].dynamicPins.publicKey: publicKey must be base64")
      },
      check.stderr)
    XCTAssertTrue(
      lines.contains { $0.contains("dynamicPins.fallback") && $0.contains("nothere.json") }, check.stderr)
    XCTAssertTrue(lines.contains { $0.contains("report.uris[0]") && $0.contains("not a url") }, check.stderr)
    let run = try Subprocess.pinproxy(["run", "--config", file])
    XCTAssertEqual(run.status, 2)
    XCTAssertTrue(run.stderr.contains("publicKey must be base64"), run.stderr)
  }

  func testVersion() throws {
    let result = try Subprocess.pinproxy(["version"])
    XCTAssertEqual(result.status, 0)
    XCTAssertTrue(result.stdout.hasPrefix("pinproxy "), result.stdout)
    XCTAssertTrue(result.stdout.contains("OpenSSL 3"), result.stdout)
  }
}

final class RunCommandTests: XCTestCase {
  /// Without a config the embedded default listens on 127.0.0.1:3128 (or, if
  /// something else holds that port, says so and exits non-zero).
  func testRunWithoutAConfigUsesTheEmbeddedDefault() throws {
    let state = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString)")
      .path
    let proxy = try ChildProcessLauncher.pinproxy(["run"], environment: ["STATE_DIRECTORY": state])
    defer {
      proxy.stop()
      try? FileManager.default.removeItem(atPath: state)
    }
    let started = proxy.wait(for: "address=127.0.0.1:3128 listener=forward", timeout: 5)
    if !started {
      XCTAssertTrue(proxy.currentOutput.contains("127.0.0.1:3128"), proxy.currentOutput)
    }
    // The local CA is created in the state directory on first start and its path logged once.
    XCTAssertTrue(
      proxy.currentOutput.contains("local-ca certificate=\(state)/ca.pem created=yes"), proxy.currentOutput)
    XCTAssertTrue(FileManager.default.fileExists(atPath: state + "/ca.key"))
  }

  func testRunWithABadConfigExitsTwoNamingTheProblem() throws {
    let temporary = try TemporaryFile(
      "listeners:\n  - {name: a, address: \"127.0.0.1:3999\", mode: sideways}\n")
    defer { temporary.remove() }
    let file = temporary.path
    let result = try Subprocess.pinproxy(["run", "--config", file])
    XCTAssertEqual(result.status, 2)
    XCTAssertTrue(
      result.stderr.contains("\(file):2:48: listeners[0].mode: \"sideways\" is not one of"), result.stderr)
  }
}
