import Foundation
import PinTestSupport
import XCTest

/// `pinproxy export`: each format read back by a reader that is not
/// pinproxy's (Python's plistlib and xml.etree, Tests/Fixtures/read_exports.py),
/// the round trip through `pinproxy import`, and the refusal of exports that
/// would lock users out at the first key rotation.
final class ExportCommandTests: XCTestCase {
  var directory = ""
  lazy var leaf = Fixtures.certificate("httpbin.pem").spkiPin
  lazy var intermediate = Fixtures.certificate("int-a.pem").spkiPin
  lazy var root = Fixtures.certificate("root-a.pem").spkiPin

  override func setUpWithError() throws {
    directory = NSTemporaryDirectory() + "export-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

  static let listener = "listeners: [{name: forward, address: \"127.0.0.1:3128\", mode: forward}]\n"

  func base64(_ pin: String) -> String { String(pin.dropFirst("sha256/".count)) }

  /// A policy with what each format has to carry: any-certificate pins with
  /// subdomains, expiry and a report URI; ATS identities with a national
  /// anchor and a TLS floor; a rule allowing plain HTTP.
  func policy(extra: String = "") throws -> String {
    let path = directory + "/policy-\(UUID().uuidString).yaml"
    try """
    \(Self.listener)anchorSets:
      national: {files: ["\(Fixtures.path("root-a.pem"))"]}
    domains:
      - domain: httpbin.org
        includesSubdomains: true
        pinningMode: publicKey
        pinnedPublicKeyHashes: ["\(intermediate)", "\(root)"]
        pinsExpire: 2030-01-01
        report: {enforce: true, uris: ["https://reports.example/pins"]}
      - domain: api.bank.example
        anchors: [system, national]
        pinnedLeafPublicKeyHashes: ["\(leaf)", "\(Fixtures.certificate("adn.pem").spkiPin)"]
        pinnedCAPublicKeyHashes: ["\(intermediate)", "\(root)"]
        minimumTLSVersion: "1.3"
      - domain: plain.example
        allowsInsecureHTTPLoads: true
    \(extra)
    """.write(toFile: path, atomically: true, encoding: .utf8)
    return path
  }

  func export(_ arguments: [String], exit: Int32, file: StaticString = #filePath, line: UInt = #line) throws
    -> ProcessResult
  {
    let result = try Subprocess.pinproxy(["export"] + arguments)
    XCTAssertEqual(result.status, exit, result.stderr, file: file, line: line)
    return result
  }

  /// What read_exports.py makes of `text` as `format`.
  func read(_ format: String, _ text: String) throws -> Any {
    let path = directory + "/\(format)-\(UUID().uuidString)"
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    let result = try Subprocess.run(
      "/usr/bin/python3", [Fixtures.directory + "/read_exports.py", format, path])
    XCTAssertEqual(result.status, 0, result.stderr + "\n" + text)
    return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
  }

  func testATSIsAnInfoPlistFragmentPlistlibReads() throws {
    let result = try export(["ats", "--config", try policy()], exit: 1)
    let ats = try XCTUnwrap(try read("ats", result.stdout) as? [String: Any])
    let pinned = try XCTUnwrap(ats["pinned"] as? [String: [String: Any]])
    XCTAssertEqual(Set(pinned.keys), ["httpbin.org", "api.bank.example"])
    XCTAssertEqual(
      pinned["api.bank.example"]?["leaf"] as? [String],
      [base64(leaf), Fixtures.certificate("adn.pem").spkiFingerprint.base64])
    XCTAssertEqual(pinned["api.bank.example"]?["ca"] as? [String], [base64(intermediate), base64(root)])
    XCTAssertEqual(pinned["httpbin.org"]?["subdomains"] as? Bool, true)
    // AF's any-certificate pins can only be CA identities in ATS: said so.
    XCTAssertEqual(pinned["httpbin.org"]?["ca"] as? [String], [base64(intermediate), base64(root)])
    XCTAssertTrue(result.stderr.contains("approximated: httpbin.org: pinningMode publicKey"), result.stderr)
    let exceptions = try XCTUnwrap(ats["exceptions"] as? [String: [String: Any]])
    XCTAssertEqual(exceptions["api.bank.example"]?["NSExceptionMinimumTLSVersion"] as? String, "TLSv1.3")
    XCTAssertEqual(exceptions["plain.example"]?["NSExceptionAllowsInsecureHTTPLoads"] as? Bool, true)
    XCTAssertNil(exceptions["httpbin.org"], "ATS's defaults are not written")
    for lost in [
      "dropped: httpbin.org: pinsExpire", "dropped: httpbin.org: report.uris",
      "dropped: api.bank.example: anchors national",
    ] {
      XCTAssertTrue(result.stderr.contains(lost), result.stderr)
    }
  }

  func testTrustKitAndroidOkHttpAndTheWatchListAsTheirReadersSeeThem() throws {
    let config = try policy()
    let trustkit = try export(["trustkit", "--config", config, "--domain", "httpbin.org"], exit: 0)
    let domains = try XCTUnwrap(try read("trustkit", trustkit.stdout) as? [String: [String: Any]])
    XCTAssertEqual(domains.count, 1)
    let domain = try XCTUnwrap(domains["httpbin.org"])
    XCTAssertEqual(domain["pins"] as? [String], [base64(intermediate), base64(root)])
    XCTAssertEqual(domain["subdomains"] as? Bool, true)
    XCTAssertEqual(domain["enforce"] as? Bool, true)
    XCTAssertEqual(domain["expiration"] as? String, "2030-01-01")
    XCTAssertEqual(domain["reportUris"] as? [String], ["https://reports.example/pins"])

    let raw = directory + "/raw"
    try FileManager.default.createDirectory(atPath: raw, withIntermediateDirectories: true)
    let android = try export(["android", "--config", config, "--raw", raw], exit: 1)
    let document = try XCTUnwrap(try read("android", android.stdout) as? [String: Any])
    XCTAssertEqual(document["base"] as? [String: String], ["cleartextTrafficPermitted": "false"])
    let configs = try XCTUnwrap(document["configs"] as? [[String: Any]])
    XCTAssertEqual(configs.count, 3)
    XCTAssertEqual(configs[0]["domains"] as? [[String]], [["httpbin.org", "true"]])
    XCTAssertEqual(configs[0]["expiration"] as? String, "2030-01-01")
    XCTAssertEqual(
      configs[0]["pins"] as? [[String]], [["SHA-256", base64(intermediate)], ["SHA-256", base64(root)]])
    XCTAssertEqual(configs[1]["anchors"] as? [String], ["system", "@raw/national"])
    XCTAssertEqual((configs[1]["pins"] as? [[String]])?.count, 4)
    XCTAssertEqual(configs[2]["cleartext"] as? String, "true")
    // The anchor file the config names, written for res/raw.
    XCTAssertEqual(
      try String(contentsOfFile: raw + "/national.pem", encoding: .utf8),
      try String(contentsOfFile: Fixtures.path("root-a.pem"), encoding: .utf8))
    XCTAssertTrue(
      android.stderr.contains("approximated: api.bank.example: pinnedLeafPublicKeyHashes"), android.stderr)
    XCTAssertTrue(android.stderr.contains("dropped: api.bank.example: minimumTLSVersion"), android.stderr)

    let okhttp = try export(["okhttp", "--config", config, "--domain", "httpbin.org"], exit: 1)
    XCTAssertEqual(
      try read("okhttp", okhttp.stdout) as? [[String]],
      [["**.httpbin.org", intermediate], ["**.httpbin.org", root]])
    XCTAssertTrue(okhttp.stderr.contains("dropped: httpbin.org: pinsExpire 2030-01-01"), okhttp.stderr)

    let watch = try export(["certspotter", "--config", config], exit: 0)
    XCTAssertEqual(try read("certspotter", watch.stdout) as? [String], [".httpbin.org", "api.bank.example"])
  }

  /// Export, import, export again: the same pins, subdomains and expiry.
  func testImportOfAnExportGivesBackTheSamePins() throws {
    let config = try policy()
    for (format, arguments) in [
      ("trustkit", ["--domain", "httpbin.org"]), ("android", [] as [String]),
      ("ats", ["--domain", "api.bank.example", "--domain", "plain.example"]),
    ] {
      let exported = try Subprocess.pinproxy(["export", format, "--config", config] + arguments)
      let file = directory + "/app-\(format)"
      try exported.stdout.write(toFile: file, atomically: true, encoding: .utf8)
      let raw = directory + "/raw-\(format)"
      try FileManager.default.createDirectory(atPath: raw, withIntermediateDirectories: true)
      if format == "android" {
        _ = try Subprocess.pinproxy(["export", "android", "--config", config, "--raw", raw])
      }
      let imported = try Subprocess.pinproxy(
        ["import", format, file] + (format == "android" ? ["--raw", raw] : []))
      XCTAssertNotEqual(imported.status, 2, imported.stderr)
      let again = directory + "/again-\(format).yaml"
      try (Self.listener + imported.stdout).write(toFile: again, atomically: true, encoding: .utf8)
      let second = try Subprocess.pinproxy(["export", format, "--config", again] + arguments)
      XCTAssertEqual(second.stdout, exported.stdout, "\(format): \(imported.stdout)\n\(second.stderr)")
      if format != "ats" {
        XCTAssertTrue(imported.stdout.contains("pinsExpire: \"2030-01-01\""), imported.stdout)
        XCTAssertTrue(imported.stdout.contains("includesSubdomains: true"), imported.stdout)
      }
      XCTAssertTrue(imported.stdout.contains(intermediate) && imported.stdout.contains(root), imported.stdout)
    }
  }

  func testASinglePinIsRefusedForTrustKitAndWarnedAboutForTheOthers() throws {
    let config = try policy(
      extra: """
          - {domain: single.example, pinningMode: publicKey, pinnedPublicKeyHashes: ["\(intermediate)"]}
        """)
    let trustkit = try export(["trustkit", "--config", config], exit: 2)
    XCTAssertEqual(trustkit.stdout, "", "nothing half-written")
    XCTAssertTrue(
      trustkit.stderr.contains("export trustkit: single.example has a single pin"), trustkit.stderr)
    // Even when asked: TrustKit itself refuses such a configuration.
    _ = try export(["trustkit", "--config", config, "--allow-single-pin"], exit: 2)

    let android = try export(["android", "--config", config, "--domain", "single.example"], exit: 0)
    XCTAssertTrue(android.stderr.contains("warning: single.example: a single pin"), android.stderr)
    XCTAssertTrue(android.stdout.contains(base64(intermediate)))
    let allowed = try export(
      ["android", "--config", config, "--domain", "single.example", "--allow-single-pin"], exit: 0)
    XCTAssertEqual(allowed.stderr, "")
    let okhttp = try export(["okhttp", "--config", config, "--domain", "single.example"], exit: 0)
    XCTAssertTrue(okhttp.stderr.contains("warning: single.example: a single pin"), okhttp.stderr)
  }

  func testWhatNoFormatCarriesIsDroppedAndBadArgumentsAreUsageErrors() throws {
    let config = try policy(
      extra: """
          - {domain: cert.example, pinningMode: certificate, pinnedCertificates: ["\(Fixtures.path("int-a.pem"))", "\(Fixtures.path("root-a.pem"))"]}
        """)
    for format in ["ats", "android", "okhttp"] {
      let result = try export([format, "--config", config, "--domain", "cert.example"], exit: 1)
      XCTAssertTrue(result.stderr.contains("dropped: cert.example: pinningMode certificate"), result.stderr)
    }
    let unknown = try export(["ats", "--config", config, "--domain", "nope.example"], exit: 2)
    XCTAssertTrue(unknown.stderr.contains("--domain nope.example"), unknown.stderr)
    _ = try export(["ats", "--config", config, "--raw", directory], exit: 2)
    _ = try export(["ios", "--config", config], exit: 2)
  }
}
