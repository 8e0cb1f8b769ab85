import Foundation
import PinTestSupport
import XCTest

/// `pinproxy ct-hook` run as Cert Spotter runs it (the environment of
/// certspotter-script(8), 0.16 as Debian ships it and the older variables),
/// on certificates made fresh with `openssl`, beside a running daemon that
/// must show an unpinned issuance within 10 s without a reload.
final class CTHookTests: ProxyTestCase {
  var work = ""

  override func setUpWithError() throws {
    work = NSTemporaryDirectory() + "cthook-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
  }

  override func tearDown() {
    super.tearDown()
    try? FileManager.default.removeItem(atPath: work)
  }

  @discardableResult
  func shell(_ script: String) throws -> String {
    let result = try Subprocess.run("/bin/bash", ["-ec", script], in: work)
    XCTAssertEqual(result.status, 0, result.stderr)
    return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// A new P-256 leaf for `names`, issued by `issuer` (a name in `work`, or
  /// a fixture's path stem), saved as NAME.pem and NAME-chain.pem (leaf, issuer).
  func issue(_ name: String, names: [String], by issuer: (cert: String, key: String)) throws {
    let san = names.map { "DNS:" + $0 }.joined(separator: ",")
    try shell(
      """
      openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout \(name).key \
        -subj "/CN=\(names[0])" -addext "subjectAltName=\(san)" -out \(name).csr 2>/dev/null
      openssl x509 -req -in \(name).csr -CA \(issuer.cert) -CAkey \(issuer.key) -days 45 -copy_extensions copy \
        -out \(name).pem 2>/dev/null
      cat \(name).pem \(issuer.cert) > \(name)-chain.pem
      """)
  }

  /// What Cert Spotter 0.16 sets for a discovered certificate.
  func certspotterEnvironment(_ name: String, names: [String]) throws -> [String: String] {
    let pubkey = try shell(
      "openssl x509 -in \(name).pem -pubkey -noout | openssl pkey -pubin -outform DER | sha256sum | cut -d' ' -f1"
    )
    let fingerprint = try shell("openssl x509 -in \(name).pem -outform DER | sha256sum | cut -d' ' -f1")
    let json = work + "/\(name).v1.json"
    try JSONSerialization.data(withJSONObject: ["dns_names": names, "pubkey_sha256": pubkey]).write(
      to: URL(fileURLWithPath: json))
    return [
      "EVENT": "discovered_cert", "SUMMARY": "certificate discovered for .httpbin.org",
      "WATCH_ITEM": ".httpbin.org",
      "CERT_FILENAME": work + "/\(name)-chain.pem", "JSON_FILENAME": json, "PUBKEY_SHA256": pubkey,
      "CERT_SHA256": fingerprint, "TBS_SHA256": String(fingerprint.reversed()),
      "NOT_BEFORE_RFC3339": "2026-11-28T00:00:00Z", "NOT_AFTER_RFC3339": "2027-01-12T00:00:00Z",
      "ISSUER_DN": "CN=New Issuer", "LOG_URI": "https://ct.example/log/", "ENTRY_INDEX": "42",
    ]
  }

  func hook(_ config: String, _ environment: [String: String], exit: Int32 = 0) throws -> ProcessResult {
    let result = try Subprocess.pinproxy(["ct-hook", "--config", config], environment: environment)
    XCTAssertEqual(result.status, exit, result.stdout + result.stderr)
    return result
  }

  /// The daemon with an admin endpoint and httpbin.org (and its subdomains)
  /// pinned to the fixtures' intermediate and root keys; its listener's port.
  func startPinnedDaemon() throws -> Int {
    let intermediate = Fixtures.certificate("int-a.pem").spkiPin
    let root = Fixtures.certificate("root-a.pem").spkiPin
    let domains = """
        - {domain: httpbin.org, includesSubdomains: true, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(intermediate)", "\(root)"]}
      """
    return try startProxy(
      map: ["httpbin.org": try origin()], domains: domains,
      extra: #"admin: {address: "127.0.0.1:{port:admin}"}"#, names: ["admin"])
  }

  func testANewKeyUnderANewIssuerIsShownWithinTenSecondsAndARenewalOnAPinnedKeyIsNot() throws {
    let port = try startPinnedDaemon()
    let root = Fixtures.certificate("root-a.pem").spkiPin
    let process = try XCTUnwrap(proxy)
    let admin = "http://127.0.0.1:\(process.ports["admin"]!)"
    XCTAssertEqual(try get("http://httpbin.org/hello", through: port).status, 200, process.log)

    // The issuer changes (a new intermediate, as in Let's Encrypt's 2026
    // hierarchy): a key no pin covers.
    try shell(
      """
      openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout new-ca.key -out new-ca.pem \
        -subj "/CN=New Issuer" -days 30 -addext basicConstraints=critical,CA:TRUE 2>/dev/null
      """)
    try issue("moved", names: ["www.httpbin.org", "httpbin.org"], by: ("new-ca.pem", "new-ca.key"))
    let moved = try certspotterEnvironment("moved", names: ["www.httpbin.org", "httpbin.org"])
    let flagged = try hook(process.configFile, moved)
    XCTAssertTrue(flagged.stdout.contains("unpinned issuance: rule httpbin.org"), flagged.stdout)
    let newKey =
      "sha256/" + Data(try XCTUnwrap(Data(hexString: moved["PUBKEY_SHA256"]!))).base64EncodedString()

    var shown: [String: Any]?
    let deadline = Date().addingTimeInterval(10)
    while shown == nil && Date() < deadline {
      let policies =
        try JSONSerialization.jsonObject(with: try Curl.run([admin + "/policies"]).body) as? [String: Any]
      let rule = (policies?["domains"] as? [[String: Any]])?.first
      shown = (rule?["unpinnedIssuances"] as? [[String: Any]])?.first
      if shown == nil { Thread.sleep(forTimeInterval: 0.2) }
    }
    let issuance = try XCTUnwrap(shown, "not in /policies within 10 s")
    XCTAssertEqual(issuance["spkiPin"] as? String, newKey)
    XCTAssertEqual(issuance["certificateSHA256"] as? String, moved["CERT_SHA256"])
    XCTAssertEqual(issuance["names"] as? [String], ["www.httpbin.org", "httpbin.org"])
    XCTAssertEqual(issuance["issuer"] as? String, "CN=New Issuer")
    XCTAssertNotNil(issuance["notBefore"])
    XCTAssertNotNil(issuance["seen"])
    let metrics = try Curl.run([admin + "/metrics"]).text
    XCTAssertTrue(metrics.contains("pinproxy_pin_unpinned_issuances{rule=\"httpbin.org\"} 1"), metrics)
    let page = try Curl.run([admin + "/"]).text
    XCTAssertTrue(page.contains("that clients pinned by this rule would refuse"), page)

    // The same certificate again: one entry.
    XCTAssertTrue(try hook(process.configFile, moved).stdout.contains("(already recorded)"))
    // A renewal under the pinned intermediate: covered, nothing recorded.
    try issue(
      "renewed", names: ["www.httpbin.org"], by: (Fixtures.path("int-a.pem"), Fixtures.path("int-a.key")))
    let renewed = try hook(
      process.configFile, try certspotterEnvironment("renewed", names: ["www.httpbin.org"]))
    XCTAssertTrue(renewed.stdout.contains("covered by the pins of httpbin.org"), renewed.stdout)
    let file = process.directory.path + "/state/ct/unpinned-issuances.json"
    let stored =
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any]
    XCTAssertEqual((stored?["sightings"] as? [Any])?.count, 1)

    // `check` reads the chain the daemon saw accepted: both pins are on it.
    let served = process.directory.path + "/state/served-chains.json"
    let written = Date().addingTimeInterval(12)
    while !FileManager.default.fileExists(atPath: served) && Date() < written {
      Thread.sleep(forTimeInterval: 0.2)
    }
    let check = try Subprocess.pinproxy(["check", "--config", process.configFile])
    XCTAssertEqual(check.status, 0, check.stderr)
    XCTAssertTrue(
      check.stderr.contains("rule httpbin.org: every pin is on the chain it served at"), check.stderr)

    // A reload that pins the new issuer clears the warning.
    let newIssuer = try shell(
      "openssl x509 -in new-ca.pem -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64"
    )
    try process.rewrite(
      config: try String(contentsOfFile: process.configFile, encoding: .utf8).replacingOccurrences(
        of: "\"\(root)\"]", with: "\"\(root)\", \"sha256/\(newIssuer)\"]"))
    process.child.signal(SIGHUP)
    XCTAssertTrue(process.child.wait(for: "reload-ok"), process.log)
    let after = try Curl.run([admin + "/metrics"]).text
    XCTAssertTrue(after.contains("pinproxy_pin_unpinned_issuances{rule=\"httpbin.org\"} 0"), after)
  }

  func testOlderVariablesNoChainAndOtherEvents() throws {
    let config = work + "/policy.yaml"
    try """
    stateDirectory: \(work)/state
    listeners: [{name: forward, address: "127.0.0.1:3128", mode: forward}]
    domains:
      - {domain: api.bank.example, pinnedCAPublicKeyHashes: ["\(Fixtures.certificate("int-a.pem").spkiPin)"]}
    """.write(toFile: config, atomically: true, encoding: .utf8)
    // Before 0.15: DNS_NAMES and PUBKEY_HASH/FINGERPRINT, no chain file:
    // the CA pins cannot be met, so the issuer is unknown.
    let older = try hook(
      config,
      [
        "PUBKEY_HASH": String(repeating: "ab", count: 32), "FINGERPRINT": String(repeating: "cd", count: 32),
        "DNS_NAMES": "api.bank.example, www.bank.example", "ISSUER_DN": "CN=Someone",
        "NOT_BEFORE_UNIXTIME": "1795000000",
      ])
    XCTAssertTrue(older.stdout.contains("issuer unknown"), older.stdout)
    let sightings =
      try JSONSerialization.jsonObject(
        with: Data(contentsOf: URL(fileURLWithPath: work + "/state/ct/unpinned-issuances.json")))
      as? [String: Any]
    let entry = try XCTUnwrap((sightings?["sightings"] as? [[String: Any]])?.first)
    XCTAssertEqual(entry["names"] as? [String], ["api.bank.example", "www.bank.example"])
    XCTAssertEqual(entry["issuer"] as? String, "CN=Someone")
    XCTAssertTrue(entry["issuerKeys"] is NSNull)

    // Events other than a discovered certificate are not judged.
    let error = try hook(config, ["EVENT": "error", "TEXT_FILENAME": "/nonexistent"])
    XCTAssertTrue(error.stdout.contains("event error ignored"), error.stdout)
    // A key that contradicts the certificate file is refused.
    try issue(
      "leaf", names: ["api.bank.example"], by: (Fixtures.path("int-a.pem"), Fixtures.path("int-a.key")))
    var contradicting = try certspotterEnvironment("leaf", names: ["api.bank.example"])
    contradicting["PUBKEY_SHA256"] = String(repeating: "00", count: 32)
    let refused = try hook(config, contradicting, exit: 2)
    XCTAssertTrue(refused.stderr.contains("PUBKEY_SHA256 does not match"), refused.stderr)
    // Nothing names a certificate: a usage error, not a silent pass.
    _ = try hook(config, ["EVENT": "discovered_cert", "DNS_NAMES": "api.bank.example"], exit: 2)
  }
}

extension Data {
  init?(hexString: String) {
    var bytes: [UInt8] = []
    var index = hexString.startIndex
    while index < hexString.endIndex {
      let next = hexString.index(index, offsetBy: 2, limitedBy: hexString.endIndex) ?? hexString.endIndex
      guard let byte = UInt8(hexString[index..<next], radix: 16) else { return nil }
      bytes.append(byte)
      index = next
    }
    self.init(bytes)
  }
}
