import Foundation
import PinTestSupport
import XCTest

/// `pinproxy import`: a realistic app configuration of each format
/// (Tests/Fixtures/import), imported by the real binary, accepted by
/// `check`, and evaluated with `evaluate` against the test PKI. Each expected
/// verdict is the one the app's own rules give (written next to it), with
/// the test roots standing in for the device's system store.
final class ImportCommandTests: XCTestCase {
  var directory = ""

  override func setUpWithError() throws {
    directory = NSTemporaryDirectory() + "import-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
  }

  override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

  static func example(_ name: String) -> String { Fixtures.directory + "/import/" + name }

  /// Imports, writes the YAML and checks that `check` accepts it.
  func imported(_ arguments: [String], exit: Int32, file: StaticString = #filePath, line: UInt = #line) throws
    -> (config: String, result: ProcessResult)
  {
    let result = try Subprocess.pinproxy(["import"] + arguments)
    XCTAssertEqual(result.status, exit, result.stderr, file: file, line: line)
    let config = directory + "/imported-\(UUID().uuidString).yaml"
    try result.stdout.write(toFile: config, atomically: true, encoding: .utf8)
    // As the README says: listeners go around the imported sections for
    // `check` (which refuses a file that would bind nothing).
    let served = directory + "/served-\(UUID().uuidString).yaml"
    try ("listeners: [{name: forward, address: \"127.0.0.1:3128\", mode: forward}]\n" + result.stdout)
      .write(toFile: served, atomically: true, encoding: .utf8)
    let check = try Subprocess.pinproxy(["check", "--config", served])
    XCTAssertEqual(check.status, 0, check.stderr + "\n" + result.stdout, file: file, line: line)
    return (config, result)
  }

  /// `trusted` or the failure code `evaluate` gives.
  func verdict(
    _ config: String, _ host: String, _ chain: String, at time: String = "2026-06-01T00:00:00Z",
    system: String = "roots.pem"
  ) throws -> String {
    let result = try Subprocess.pinproxy(
      ["evaluate", "--config", config, "--host", host, "--chain", chain, "--at", time],
      environment: ["SSL_CERT_FILE": Fixtures.path(system), "SSL_CERT_DIR": "/nonexistent"])
    if result.stdout == "trusted\n" { return "trusted" }
    let parts = result.stdout.split(separator: ":", maxSplits: 2)
    return parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : result.stdout + result.stderr
  }

  /// Rewrites `input` as `output` with Python's plistlib (the format tools ship apps with).
  func convert(_ script: String, _ input: String, to output: String) throws {
    let result = try Subprocess.run(
      "/usr/bin/python3", ["-c", "import json,plistlib,sys; " + script, input, output])
    XCTAssertEqual(result.status, 0, result.stderr)
  }

  let httpbin = Fixtures.path("httpbin-chain.pem")
  let ecdsa = Fixtures.path("ecdsa-chain.pem")
  let alpha = Fixtures.path("adn-chain.pem")

  func testATSFromAnInfoPlistDecidesAsTheAppDoes() throws {
    let (config, result) = try imported(
      ["ats", Self.example("Info.plist"), "--ct-log-list", SCTFixtures.logList], exit: 1)
    XCTAssertTrue(result.stderr.contains("dropped: NSAllowsArbitraryLoadsInWebContent"), result.stderr)
    XCTAssertTrue(
      result.stderr.contains("ignored: NSAllowsArbitraryLoads: ignored, as iOS 10"), result.stderr)
    XCTAssertTrue(
      result.stderr.contains("approximated: NSPinnedDomains[\"httpbin.org\"].NSIncludesSubdomains"))
    XCTAssertTrue(result.stdout.contains("minimumTLSVersion: \"1.0\"  # NSExceptionMinimumTLSVersion"))
    XCTAssertTrue(
      result.stdout.contains("minimumTLSVersion: \"1.1\"  # NSThirdPartyExceptionMinimumTLSVersion"))
    XCTAssertTrue(
      result.stdout.contains("allowsInsecureHTTPLoads: true  # NSExceptionAllowsInsecureHTTPLoads"))
    XCTAssertTrue(
      result.stdout.contains("requiresForwardSecrecy: false  # NSExceptionRequiresForwardSecrecy"))

    // httpbin.org pins CA intermediate A and the httpbin leaf's key (or the backup), one label down too.
    XCTAssertEqual(try verdict(config, "httpbin.org", httpbin), "trusted")
    XCTAssertEqual(try verdict(config, "www.httpbin.org", httpbin), "trusted")
    // ecdsa.httpbin.org: the CA matches, the leaf key is in neither leaf identity.
    XCTAssertEqual(try verdict(config, "ecdsa.httpbin.org", ecdsa), "pin-mismatch")
    // alpha.net chains to root B; its CA identity is root A.
    XCTAssertEqual(try verdict(config, "alpha.net", alpha), "pin-mismatch")
    // legacy.httpbin.org: exceptions, and pinned through its parent.
    XCTAssertEqual(try verdict(config, "legacy.httpbin.org", httpbin), "trusted")
    // ct.httpbin.org: NSRequiresCertificateTransparency; the backup leaf carries two SCTs.
    XCTAssertEqual(try verdict(config, "ct.httpbin.org", httpbin), "ct-required")
    XCTAssertEqual(
      try verdict(config, "ct.httpbin.org", SCTFixtures.path("embedded-ab-chain.pem")), "trusted")
  }

  func testABinaryPlistImportsExactlyAsItsXML() throws {
    let binary = directory + "/Info-binary.plist"
    try convert(
      "d=plistlib.load(open(sys.argv[1],'rb')); open(sys.argv[2],'wb').write(plistlib.dumps(d, fmt=plistlib.FMT_BINARY))",
      Self.example("Info.plist"), to: binary)
    let bytes = try XCTUnwrap(FileManager.default.contents(atPath: binary))
    XCTAssertEqual(String(decoding: bytes.prefix(6), as: UTF8.self), "bplist")
    let xml = try Subprocess.pinproxy(["import", "ats", Self.example("Info.plist")])
    let fromBinary = try Subprocess.pinproxy(["import", "ats", binary])
    let body = { (text: String) in text.split(separator: "\n").dropFirst().joined(separator: "\n") }
    XCTAssertEqual(body(fromBinary.stdout), body(xml.stdout))
    XCTAssertFalse(xml.stdout.isEmpty)
    // Without a log list for NSRequiresCertificateTransparency, that is said.
    XCTAssertTrue(
      xml.stderr.contains("dropped: NSRequiresCertificateTransparency needs a CT log list"), xml.stderr)
  }

  func testTrustKitFromJSONAndPlistDecidesAsTheAppDoes() throws {
    let (config, result) = try imported(["trustkit", Self.example("trustkit.json")], exit: 0)
    XCTAssertTrue(result.stderr.contains("ignored: kTSKSwizzleNetworkDelegates"), result.stderr)
    XCTAssertTrue(
      result.stdout.contains("report: {enforce: false, uris: [\"https://reports.alpha.net/pins\"]}"))
    // httpbin.org and its subdomains pin root B and the alpha.net key: the httpbin chain has neither.
    XCTAssertEqual(try verdict(config, "www.httpbin.org", httpbin), "pin-mismatch")
    // legacy.httpbin.org is excluded from its parent's pins.
    XCTAssertEqual(try verdict(config, "legacy.httpbin.org", httpbin), "trusted")
    XCTAssertEqual(try verdict(config, "ecdsa.httpbin.org", ecdsa), "trusted")
    // old.httpbin.org's pins expired on 2026-01-01: enforced before, fail open after.
    XCTAssertEqual(
      try verdict(config, "old.httpbin.org", httpbin, at: "2025-12-01T00:00:00Z"), "pin-mismatch")
    XCTAssertEqual(try verdict(config, "old.httpbin.org", httpbin), "trusted")
    // alpha.net is report-only (kTSKEnforcePinning NO): accepted, with a note.
    XCTAssertEqual(try verdict(config, "alpha.net", alpha), "trusted")

    // The same configuration as an Info.plist's TSKConfiguration.
    let plist = directory + "/Info.plist"
    try convert(
      "d=json.load(open(sys.argv[1])); open(sys.argv[2],'wb').write(plistlib.dumps({'CFBundleIdentifier': 'org.httpbin.app', 'TSKConfiguration': d}))",
      Self.example("trustkit.json"), to: plist)
    let fromPlist = try Subprocess.pinproxy(["import", "trustkit", plist])
    let body = { (text: String) in text.split(separator: "\n").dropFirst().joined(separator: "\n") }
    XCTAssertEqual(body(fromPlist.stdout), body(result.stdout))
  }

  /// Report URIs go through the rule `check` applies (`ConfigValues.internalURL`):
  /// one it would refuse is dropped with a note, never written.
  func testTrustKitReportURIsCheckWouldRefuseAreDropped() throws {
    let input = directory + "/report-uris.json"
    let uris = [
      "https://r.example/a\"b", "https://r.example/x\ny", "https://r.example/good",
      "https://r.example/p#frag", "https://user@r.example/",
    ]
    let settings: [String: Any] = [
      "kTSKPublicKeyHashes": [
        "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
      ],
      "kTSKReportUris": uris,
    ]
    try JSONSerialization.data(withJSONObject: ["kTSKPinnedDomains": ["r.example": settings]]).write(
      to: URL(fileURLWithPath: input))
    let (config, result) = try imported(["trustkit", input], exit: 1)
    XCTAssertTrue(
      result.stdout.contains("report: {enforce: true, uris: [\"https://r.example/good\"]}"), result.stdout)
    for index in [0, 1, 3, 4] {
      let note =
        "dropped: kTSKPinnedDomains[\"r.example\"].kTSKReportUris[\(index)]: not an http:// or https:// URL"
      XCTAssertTrue(result.stderr.contains(note), result.stderr)
    }
    // The same rule in `check`: the quote and the newline written by hand are refused there.
    let text = try String(contentsOfFile: config, encoding: .utf8)
    let handWritten = directory + "/hand-written.yaml"
    try text.replacingOccurrences(
      of: "\"https://r.example/good\"", with: #""https://r.example/a\"b", "https://r.example/x\ny""#
    ).write(toFile: handWritten, atomically: true, encoding: .utf8)
    let check = try Subprocess.pinproxy(["check", "--config", handWritten])
    XCTAssertEqual(check.status, 2, check.stderr)
    for index in [0, 1] {
      XCTAssertTrue(
        check.stderr.contains("domains[0].report.uris[\(index)]: \"https://r.example/"), check.stderr)
    }
  }

  func testAndroidNetworkSecurityConfigDecidesAsTheAppDoes() throws {
    let (config, result) = try imported(
      ["android", Self.example("network_security_config.xml"), "--raw", Self.example("raw")], exit: 1)
    XCTAssertTrue(result.stderr.contains("dropped: certificates src=\"user\""), result.stderr)
    XCTAssertTrue(result.stderr.contains("dropped: pin (line 36): only digest=\"SHA-256\""), result.stderr)
    XCTAssertTrue(result.stderr.contains("ignored: <debug-overrides>"), result.stderr)
    XCTAssertEqual(try verdict(config, "www.httpbin.org", httpbin, system: "root-a.pem"), "trusted")
    // The nested domain-config inherits the pin set and allows cleartext.
    XCTAssertTrue(result.stdout.contains("allowsInsecureHTTPLoads: true  # cleartextTrafficPermitted"))
    XCTAssertEqual(try verdict(config, "legacy.httpbin.org", httpbin, system: "root-a.pem"), "trusted")
    XCTAssertEqual(try verdict(config, "ecdsa.httpbin.org", ecdsa, system: "root-a.pem"), "pin-mismatch")
    // alpha.net trusts only the app's raw anchor (root B), and its pins expired on 2026-01-01.
    XCTAssertEqual(try verdict(config, "alpha.net", alpha, system: "root-a.pem"), "trusted")
    XCTAssertEqual(
      try verdict(config, "alpha.net", alpha, at: "2025-12-01T00:00:00Z", system: "root-a.pem"),
      "pin-mismatch")

    // Without the raw directory the anchor file is a placeholder, said on stderr, and check refuses it.
    let bare = try Subprocess.pinproxy(["import", "android", Self.example("network_security_config.xml")])
    XCTAssertEqual(bare.status, 1)
    XCTAssertTrue(bare.stderr.contains("give its res/raw directory with --raw DIR"), bare.stderr)
  }

  func testHostileNamesAndValuesNeverReachTheYAML() throws {
    let plist = directory + "/hostile.plist"
    let script = """
      import plistlib,sys
      d = {'NSAppTransportSecurity': {'NSExceptionDomains': {
        'evil.example"\\n  - domain: "attacker.example': {'NSExceptionAllowsInsecureHTTPLoads': True},
        'ok.example': {'NSExceptionMinimumTLSVersion': 'TLSv1.0"\\nlisteners: []', 'NSIncludesSubdomains': 'yes'}},
        'NSPinnedDomains': {'pinned.example': {'NSPinnedLeafIdentities': [{'SPKI-SHA256-BASE64': 'not base64'}]}}}}
      open(sys.argv[1],'wb').write(plistlib.dumps(d))
      """
    XCTAssertEqual(try Subprocess.run("/usr/bin/python3", ["-c", script, plist]).status, 0)
    let (_, result) = try imported(["ats", plist], exit: 1)
    // The notes are repeated as comments, one line each; no value line carries them.
    let values = result.stdout.split(separator: "\n").filter {
      !$0.trimmingCharacters(in: .whitespaces).hasPrefix("#")
    }
    XCTAssertFalse(
      values.contains { $0.contains("attacker.example") || $0.contains("listeners") }, result.stdout)
    XCTAssertEqual(values.filter { $0.contains("- domain:") }.count, 2, result.stdout)
    XCTAssertTrue(result.stderr.contains("not a host name"), result.stderr)
    XCTAssertTrue(result.stderr.contains("NSExceptionMinimumTLSVersion: not one of TLSv1.0"), result.stderr)
    XCTAssertTrue(result.stderr.contains("NSIncludesSubdomains: not a boolean"), result.stderr)
    XCTAssertTrue(result.stderr.contains("SPKI-SHA256-BASE64 digest"), result.stderr)
    XCTAssertFalse(result.stderr.contains("\n  - domain"), "notes are one line each")
    XCTAssertTrue(
      result.stderr.contains("NSPinnedLeafIdentities: no usable identity, so nothing of it is enforced"),
      result.stderr)
    // Not a plist at all: exit 2.
    let garbage = directory + "/garbage.plist"
    try "<plist><dict><key>".write(toFile: garbage, atomically: true, encoding: .utf8)
    XCTAssertEqual(try Subprocess.pinproxy(["import", "ats", garbage]).status, 2)
    let doctype = directory + "/nsc.xml"
    try "<!DOCTYPE x [<!ENTITY a \"b\">]><network-security-config/>".write(
      toFile: doctype, atomically: true, encoding: .utf8)
    // Anchors the proxy cannot use never fall back to the system store; a
    // byte-order mark before the document is fine.
    let userOnly = directory + "/user-only.xml"
    try Data(
      [0xEF, 0xBB, 0xBF]
        + Array(
          """
          <network-security-config><domain-config><domain>a.example</domain>
          <trust-anchors><certificates src="user"/></trust-anchors></domain-config></network-security-config>
          """.utf8)
    ).write(to: URL(fileURLWithPath: userOnly))
    let noAnchors = try Subprocess.pinproxy(["import", "android", userOnly])
    XCTAssertEqual(noAnchors.status, 1, noAnchors.stderr)
    XCTAssertTrue(noAnchors.stdout.contains("anchors: [\"app-anchors\"]"), noAnchors.stdout)
    XCTAssertTrue(noAnchors.stderr.contains("whose file you must supply"), noAnchors.stderr)
    let refused = try Subprocess.pinproxy(["import", "android", doctype])
    XCTAssertEqual(refused.status, 2)
    XCTAssertTrue(refused.stderr.contains("DOCTYPE"), refused.stderr)
  }
}
