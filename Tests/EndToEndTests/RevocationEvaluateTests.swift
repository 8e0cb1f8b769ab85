import Foundation
import PinTestSupport
import XCTest

/// `pinproxy evaluate --crl … --ocsp-response …` decides every revocation
/// case as the daemon does (RevocationTests), offline, at a fixed instant.
final class RevocationEvaluateTests: XCTestCase {
  static func pki(_ name: String) -> String { Fixtures.path("revocation/" + name) }

  /// (case, host, chain, extra arguments, exit status, output fragment)
  static let cases: [(String, String, String, [String], Int32, String)] = [
    ("no revocation information", "good", "good", [], 0, "trusted"),
    ("revoked leaf in a CRL", "revoked", "revoked", ["--crl", "intermediate.crl"], 1, "rejected: revoked: "),
    ("PEM CRL", "revoked", "revoked", ["--crl", "intermediate.crl.pem"], 1, "(keyCompromise)"),
    ("good leaf in the same CRL", "good", "good", ["--crl", "intermediate.crl"], 0, "trusted"),
    (
      "revoked intermediate", "under-revoked", "under-revoked", ["--crl", "root.crl"], 1,
      "Revocation Test Revoked Intermediate"
    ),
    (
      "CRL without CRLNumber", "revoked", "revoked", ["--crl", "intermediate-nonumber.crl"], 2, "no CRLNumber"
    ),
    (
      "CRL with a critical CRLNumber", "revoked", "revoked", ["--crl", "intermediate-critical-number.crl"], 2,
      "CRLNumber is marked critical"
    ),
    ("expired CRL", "good", "good", ["--crl", "intermediate-expired.crl"], 2, "expired at 2025-12-01"),
    (
      "CRL signed by another key", "good", "good", ["--crl", "intermediate-wrongkey.crl"], 1,
      "rejected: revocation-unknown: "
    ),
    (
      "CRL from an issuer without cRLSign", "under-nocrlsign", "under-nocrlsign", ["--crl", "nocrlsign.crl"],
      1,
      "lacks cRLSign"
    ),
    ("good staple", "good", "good", ["--ocsp-response", "ocsp-good.der"], 0, "trusted"),
    ("delegated responder", "good", "good", ["--ocsp-response", "ocsp-good-delegated.der"], 0, "trusted"),
    (
      "revoked staple", "revoked", "revoked", ["--ocsp-response", "ocsp-revoked.der"], 1,
      "rejected: revoked: "
    ),
    ("expired staple is ignored", "good", "good", ["--ocsp-response", "ocsp-expired.der"], 0, "trusted"),
    (
      "wrongly signed staple is ignored", "good", "good", ["--ocsp-response", "ocsp-wrong-signer.der"], 0,
      "trusted"
    ),
    (
      "another certificate's staple is ignored", "good", "good", ["--ocsp-response", "ocsp-other-cert.der"],
      0, "trusted"
    ),
    (
      "must-staple without a staple", "muststaple", "muststaple", [], 1,
      "rejected: revocation-unknown: "
    ),
    (
      "must-staple with an expired staple", "muststaple", "muststaple",
      ["--ocsp-response", "ocsp-expired.der"], 1,
      "RFC 7633"
    ),
    (
      "indirect CRL, its issuer's certificate in its file", "indirect-revoked", "indirect-revoked",
      ["--crl", "indirect.crl.pem"], 1, "rejected: revoked: "
    ),
    (
      "indirect CRL, a certificate it does not list", "indirect-good", "indirect-good",
      ["--crl", "indirect.crl.pem"], 0, "trusted"
    ),
    (
      "indirect CRL from an issuer no anchor certified", "indirect-good", "indirect-good",
      ["--crl", "indirect-unrelated.crl.pem"], 1, "does not chain to the path's anchor"
    ),
    (
      "indirect CRL without its issuer's certificate", "indirect-good", "indirect-good",
      ["--crl", "indirect.crl"], 1,
      "is not in the CRL's file, on the path or in the anchor set"
    ),
    (
      "indirect CRL for a certificate that does not name its issuer", "good", "good",
      ["--crl", "indirect.crl.pem"], 0,
      "trusted"
    ),
    (
      "a distribution point naming only its CRL issuer", "dp-issuer-only", "dp-issuer-only",
      ["--crl", "indirect-any.crl.pem"], 1, "rejected: revoked: "
    ),
    (
      "staple from a delegated responder whose certificate expired", "muststaple", "muststaple",
      ["--ocsp-response", "ocsp-muststaple-expired-responder.der"], 1, "whose certificate is not valid now"
    ),
    (
      "must-staple with a good staple", "muststaple", "muststaple",
      ["--ocsp-response", "ocsp-muststaple-good.der"], 0, "trusted"
    ),
  ]

  func testEveryCaseDecidesOffline() throws {
    for (name, host, chain, extra, status, fragment) in Self.cases {
      let arguments =
        [
          "evaluate", "--host", "\(host).revocation.test", "--chain", Self.pki("\(chain)-chain.pem"),
          "--anchors",
          Self.pki("root.pem"), "--at", "2026-06-01T00:00:00Z",
        ] + extra.map { $0.hasPrefix("--") ? $0 : Self.pki($0) }
      let result = try Subprocess.pinproxy(arguments)
      XCTAssertEqual(result.status, status, "\(name): \(result.stdout)\(result.stderr)")
      XCTAssertTrue(
        (result.stdout + result.stderr).contains(fragment), "\(name): \(result.stdout)\(result.stderr)")
    }
  }

  /// `evaluate --config` with one rule for `HOST.revocation.test` under
  /// anchor set `rev` (the revocation root and `crls`), with `revocation`.
  func evaluate(_ host: String, revocation: String, crls: [String] = []) throws -> ProcessResult {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
      "reveval-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let config = directory.appendingPathComponent("c.yaml").path
    try """
    anchorSets:
      rev: {files: ["\(Self.pki("root.pem"))"], crls: [\(crls.map { "\"\(Self.pki($0))\"" }.joined(separator: ", "))]}
    domains:
      - {domain: \(host).revocation.test, anchors: [rev], revocation: \(revocation)}
    """.write(toFile: config, atomically: true, encoding: .utf8)
    return try Subprocess.pinproxy([
      "evaluate", "--host", "\(host).revocation.test", "--chain", Self.pki("\(host)-chain.pem"), "--config",
      config,
      "--at", "2026-06-01T00:00:00Z",
    ])
  }

  /// A CRL scoped to a shard by a relative or a directory name covers no
  /// certificate whose distribution point is a URL: under `crl: require`
  /// it does not stand in for the CRL the certificate names.
  func testAShardCRLCoversOnlyItsShard() throws {
    for shard in ["intermediate-shard-relative.crl", "intermediate-shard-dirname.crl"] {
      let result = try evaluate("revoked", revocation: "{crl: require}", crls: [shard, "root.crl"])
      XCTAssertEqual(result.status, 1, "\(shard): \(result.stdout)\(result.stderr)")
      XCTAssertTrue(result.stdout.contains("revocation-unknown"), "\(shard): \(result.stdout)")
    }
  }

  /// A chain accepted only by its pin under allowInvalidCertificates, sent
  /// without its intermediate: the leaf is still examined, and a supplied
  /// CRL for its issuer that nothing on the path can verify refuses it.
  func testAnUnverifiedLeafAloneIsStillExamined() throws {
    let pin = try Subprocess.run(
      "/bin/sh",
      [
        "-c",
        "openssl x509 -pubkey -noout -in '\(Self.pki("revoked.pem"))' | openssl pkey -pubin -outform der"
          + " | openssl dgst -sha256 -binary | base64",
      ])
    let arguments = [
      "evaluate", "--host", "revoked.revocation.test", "--chain", Self.pki("revoked.pem"), "--anchors",
      Self.pki("root.pem"), "--at", "2026-06-01T00:00:00Z", "--allow-invalid-certificates", "--pinning-mode",
      "publicKey", "--pinned-public-key-hash",
      "sha256/" + pin.stdout.trimmingCharacters(in: .whitespacesAndNewlines),
    ]
    XCTAssertEqual(try Subprocess.pinproxy(arguments).status, 0)
    let result = try Subprocess.pinproxy(arguments + ["--crl", Self.pki("intermediate.crl")])
    XCTAssertEqual(result.status, 1, result.stdout + result.stderr)
    XCTAssertTrue(result.stdout.contains("revocation-unknown"), result.stdout)
  }

  /// A rule's `revocation` settings under `--config`: offline, what the
  /// network would give is missing, so `require` and `hardFail` refuse and
  /// `ifAvailable` and `softFail` accept, saying so.
  func testRuleSettingsDecideWithWhatIsAtHand() throws {
    for (setting, status, fragment) in [
      ("{crl: require}", Int32(1), "not fetched (offline)"), ("{crl: ifAvailable}", 0, "trusted"),
      ("{ocsp: hardFail}", 1, "not queried (offline)"), ("{ocsp: softFail}", 0, "accepted without an answer"),
    ] {
      let result = try evaluate("good", revocation: setting)
      XCTAssertEqual(result.status, status, "\(setting): \(result.stdout)\(result.stderr)")
      XCTAssertTrue(
        (result.stdout + result.stderr).contains(fragment), "\(setting): \(result.stdout)\(result.stderr)")
    }
  }
}
