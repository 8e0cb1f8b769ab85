import Foundation
import PinTrust

/// The certificate-profile cases of Tests/Fixtures/make-strict-pki.py and
/// the verdict each must get. One table for every level that evaluates a
/// chain (PinTrust/PinTLS, `pinproxy evaluate`, the daemon), so they are held
/// to the same answers.
public enum StrictCases {
  public enum Verdict: Equatable, Sendable {
    case trusted
    /// The failure code and a fragment the reason must contain.
    case rejected(FailureCode, String)
  }

  public struct Case: Sendable {
    public let name: String
    /// The numbered row of the certificate profile table (docs/TRUST.md) the case belongs to (0: the baseline).
    public let item: Int
    public let verdict: Verdict
  }

  /// The fixed clock of the table (inside every case's dates).
  public static let now = Fixtures.now

  public static let all: [Case] = [
    Case(name: "baseline", item: 0, verdict: .trusted),
    // 1. RFC 5280 profile
    Case(name: "root-no-basic-constraints", item: 1, verdict: malformed("without basicConstraints cA=TRUE")),
    // Anchors are exempt from criticality (system roots such as Go Daddy Class 2 have it non-critical).
    Case(name: "root-basic-constraints-noncritical", item: 1, verdict: .trusted),
    Case(
      name: "intermediate-basic-constraints-noncritical", item: 1,
      verdict: malformed("non-critical basicConstraints")),
    Case(
      name: "intermediate-no-basic-constraints", item: 1, verdict: .rejected(.untrustedChain, "invalid CA")),
    Case(name: "leaf-no-authority-key-id", item: 1, verdict: malformed("no authorityKeyIdentifier")),
    Case(name: "intermediate-no-authority-key-id", item: 1, verdict: malformed("no authorityKeyIdentifier")),
    Case(name: "intermediate-no-subject-key-id", item: 1, verdict: malformed("without subjectKeyIdentifier")),
    Case(
      name: "leaf-keycertsign-not-ca", item: 1, verdict: malformed("keyCertSign without basicConstraints")),
    Case(name: "leaf-empty-subject-san-noncritical", item: 1, verdict: malformed("empty subject")),
    Case(
      name: "intermediate-policy-constraints-noncritical", item: 1, verdict: malformed("policyConstraints")),
    Case(
      name: "leaf-name-constraints-critical", item: 1, verdict: malformed("nameConstraints in an end-entity")),
    Case(
      name: "leaf-name-constraints-noncritical", item: 1,
      verdict: malformed("nameConstraints in an end-entity")),
    // 2. Key and signature strength
    Case(name: "leaf-rsa-1024", item: 2, verdict: weak("RSA-1024")),
    Case(name: "root-rsa-1024", item: 2, verdict: weak("depth 2")),
    Case(name: "leaf-rsa-2052", item: 2, verdict: weak("not a whole number of bytes")),
    Case(name: "leaf-dsa", item: 2, verdict: weak("DSA")),
    Case(name: "leaf-p192", item: 2, verdict: weak("not on P-256, P-384 or P-521")),
    Case(name: "leaf-secp256k1", item: 2, verdict: weak("secp256k1")),
    Case(name: "leaf-ed25519", item: 2, verdict: weak("not RSA or ECDSA")),
    Case(name: "leaf-p384", item: 2, verdict: .trusted),
    Case(name: "leaf-sha1-signature", item: 2, verdict: weak("sha1WithRSAEncryption")),
    Case(name: "root-sha1-self-signature", item: 2, verdict: .trusted),
    // 3. A CA certificate as the leaf: accepted, as Apple's SSL policy does.
    Case(name: "leaf-is-ca", item: 3, verdict: .trusted),
    // 4. Name constraints
    Case(
      name: "nc-excluded-wildcard-bar", item: 4,
      verdict: .rejected(.untrustedChain, "exclude bar.example.com")),
    Case(name: "nc-excluded-wildcard-foo", item: 4, verdict: .trusted),
    Case(
      name: "nc-permitted-dot-san", item: 4,
      verdict: malformed("\".example.com\" is not in preferred name syntax")),
    Case(name: "nc-leading-period", item: 4, verdict: malformed("\".example.net\" is malformed")),
    Case(name: "nc-empty", item: 4, verdict: malformed("neither permitted nor excluded")),
    Case(name: "nc-empty-subtrees", item: 4, verdict: malformed("nameConstraints")),
    // 5. subjectAltName syntax
    Case(name: "san-emoji", item: 5, verdict: malformed("not in preferred name syntax")),
    Case(
      name: "san-underscore", item: 5,
      verdict: malformed("\"a_b.strict.test\" is not in preferred name syntax")),
    // 6. Subject CN consistency: a CA/Browser Forum rule, so each case's own
    // (private) anchor set follows RFC 5280 and accepts; `baselineVerdicts`
    // gives what a system root gets.
    Case(name: "cn-not-in-san", item: 6, verdict: .trusted),
    Case(name: "cn-case-differs", item: 6, verdict: .trusted),
    Case(name: "cn-u-label", item: 6, verdict: .trusted),
    Case(name: "cn-ip-text-form", item: 6, verdict: .trusted),
    Case(name: "cn-ip-consistent", item: 6, verdict: .trusted),
    Case(name: "cn-display-name", item: 6, verdict: .trusted),
    // 7. Malformed extensions
    Case(name: "leaf-aia-malformed", item: 7, verdict: malformed("Authority Information Access")),
    Case(name: "leaf-san-critical-with-subject", item: 7, verdict: malformed("critical subjectAltName")),
    Case(name: "root-aki-without-key-id", item: 7, verdict: malformed("without a keyIdentifier")),
    // 8. notAfter is inclusive (the instants are tested on their own)
    Case(name: "validity-edge", item: 8, verdict: .trusted),
    // 9. Path building with alternatives
    Case(name: "path-intermediates-reversed", item: 9, verdict: .trusted),
    Case(name: "path-root-and-intermediate-swapped", item: 9, verdict: .trusted),
    Case(name: "path-constrained-then-free", item: 9, verdict: .trusted),
    Case(name: "path-expired-cross-then-valid", item: 9, verdict: .trusted),
    Case(name: "path-hostile-bag", item: 9, verdict: .rejected(.untrustedChain, "does not verify")),
    // 10. Anchor-set members are trust points
    Case(name: "anchor-sub-ca-only", item: 10, verdict: .trusted),
    Case(name: "self-signed-leaf-no-aki", item: 10, verdict: .trusted),
  ]

  /// The CN cases when the case's root stands in for the system store: the
  /// Baseline Requirements apply (BR 7.1.4.3).
  public static let baselineVerdicts: [String: Verdict] = [
    "cn-not-in-san": malformed("common name \"other.strict.test\""),
    "cn-case-differs": malformed("common name \"CN-CASE-DIFFERS.strict.test\""),
    "cn-u-label": malformed("is not one of the subjectAltName values"),
    "cn-ip-text-form": malformed("common name \"127.000.000.001\""),
    "cn-ip-consistent": .trusted,
    "cn-display-name": .trusted,
  ]

  static func malformed(_ fragment: String) -> Verdict { .rejected(.malformedCertificate, fragment) }
  static func weak(_ fragment: String) -> Verdict { .rejected(.weakKey, fragment) }

  /// The host each case is for, from the generated manifest.
  public static let hosts: [String: String] = {
    let url = URL(fileURLWithPath: Fixtures.path("strict/manifest.json"))
    guard let data = try? Data(contentsOf: url),
      let entries = try? JSONSerialization.jsonObject(with: data) as? [[String: String]]
    else { preconditionFailure("Tests/Fixtures/pki/strict/manifest.json is missing or unreadable") }
    return Dictionary(
      uniqueKeysWithValues: entries.compactMap { entry in
        guard let name = entry["name"], let host = entry["host"] else { return nil }
        return (name, host)
      })
  }()

  public static func chainPath(_ name: String) -> String { Fixtures.path("strict/\(name).chain.pem") }
  public static func anchorsPath(_ name: String) -> String { Fixtures.path("strict/\(name).anchors.pem") }
  public static func keyPath(_ name: String) -> String { Fixtures.path("strict/\(name).key") }

  /// Whether a decision is the case's verdict; nil when it is, else what differs.
  public static func mismatch(_ decision: TrustDecision, _ verdict: Verdict) -> String? {
    switch (decision, verdict) {
    case (.trusted, .trusted): return nil
    case (.rejected(let failure), .rejected(let code, let fragment)):
      if failure.code == code && failure.reason.contains(fragment) { return nil }
      return "expected \(code.rawValue) with \"\(fragment)\", got \(decision.summary)"
    default: return "expected \(verdict), got \(decision.summary)"
    }
  }
}
