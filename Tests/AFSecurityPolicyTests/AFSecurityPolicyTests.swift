import PinConfig
import PinProxy
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// AFNetworking's AFSecurityPolicyTests, one test per AF test and named after
/// it, run against our evaluator and the real OpenSSL verifier.
///
/// Fixture mapping (Tests/Fixtures/make-pki.py): the httpbin.org server trust
/// is `httpbin-chain.pem` (leaf + intermediate, root not sent); AF's
/// "Let's Encrypt Authority X3" is `int-a.pem`, "DST Root CA X3" is
/// `root-a.pem`; the ADN server trust is `adn-chain.pem` under the other root;
/// AF's self-signed `foobar.com.cer` (CN only), `AltName.cer` (SAN foobar.com)
/// and `NoDomains.cer` are `foobar-cn.pem`, `altname.pem`, `nodomains.pem`.
/// Both test roots stand in for the iOS system store.
final class AFSecurityPolicyTests: XCTestCase {
  lazy var harness = PolicyHarness()

  let httpBinOrgServerTrust = "httpbin-chain.pem"
  let adnNetServerTrust = "adn-chain.pem"
  var httpBinOrgCertificate: Certificate { Fixtures.certificate("httpbin.pem") }
  var letsEncryptAuthorityCertificate: Certificate { Fixtures.certificate("int-a.pem") }
  var dstRootCertificate: Certificate { Fixtures.certificate("root-a.pem") }
  var selfSignedCertificateWithoutDomain: String { "nodomains.pem" }
  var selfSignedCertificateWithCommonNameDomain: String { "foobar-cn.pem" }
  var selfSignedCertificateWithDNSNameDomain: String { "altname.pem" }

  func policy(_ mode: PinningMode, pinned: [Certificate] = []) -> SecurityPolicy {
    SecurityPolicy(pinningMode: mode, pinnedCertificates: pinned)
  }

  func assertTrusted(
    _ policy: SecurityPolicy, _ chain: String, domain: String?, file: StaticString = #filePath,
    line: UInt = #line
  ) {
    let decision = harness.evaluate(policy, chain: chain, host: domain)
    XCTAssertTrue(decision.isTrusted, decision.summary, file: file, line: line)
  }

  func assertRejected(
    _ policy: SecurityPolicy, _ chain: String, domain: String?, code: FailureCode,
    file: StaticString = #filePath, line: UInt = #line
  ) {
    let decision = harness.evaluate(policy, chain: chain, host: domain)
    guard case .rejected(let failure) = decision else {
      return XCTFail("expected rejection \(code.rawValue), got trusted", file: file, line: line)
    }
    XCTAssertEqual(failure.code, code, failure.reason, file: file, line: line)
  }

  // MARK: - Default policy: default values

  func testDefaultPolicyPinningModeIsSetToNone() {
    XCTAssertEqual(SecurityPolicy.default.pinningMode, .none)
  }

  func testDefaultPolicyHasInvalidCertificatesAreDisabledByDefault() {
    XCTAssertFalse(SecurityPolicy.default.allowInvalidCertificates)
  }

  func testDefaultPolicyHasDomainNamesAreValidatedByDefault() {
    XCTAssertTrue(SecurityPolicy.default.validatesDomainName)
  }

  func testDefaultPolicyHasNoPinnedCertificates() {
    XCTAssertEqual(SecurityPolicy.default.pinnedCertificates.count, 0)
    XCTAssertEqual(SecurityPolicy.default.pinnedPublicKeyHashes.count, 0)
  }

  // MARK: Default policy: positive evaluation

  func testDefaultPolicyDoesAllowHTTPBinOrgCertificate() {
    assertTrusted(.default, httpBinOrgServerTrust, domain: nil)
  }

  func testDefaultPolicyDoesAllowHTTPBinOrgCertificateForValidDomainName() {
    assertTrusted(.default, httpBinOrgServerTrust, domain: "httpbin.org")
  }

  // MARK: Default policy: negative evaluation

  func testDefaultPolicyDoesNotAllowInvalidCertificate() {
    assertRejected(.default, selfSignedCertificateWithoutDomain, domain: nil, code: .untrustedChain)
  }

  func testDefaultPolicyDoesNotAllowCertificateWithInvalidDomainName() {
    assertRejected(.default, httpBinOrgServerTrust, domain: "apple.com", code: .hostnameMismatch)
  }

  // MARK: - Public key pinning: default values

  /// AF loads the bundle's certificates by default; we load the files a rule names.
  func testPolicyWithPublicKeyPinningModeHasPinnedCertificates() {
    let pinned = Fixtures.certificates("httpbin-fullchain.pem")
    XCTAssertGreaterThan(policy(.publicKey, pinned: pinned).pinnedCertificates.count, 0)
    XCTAssertEqual(policy(.publicKey, pinned: pinned).pinCount, 3)
  }

  func testPolicyWithPublicKeyPinningModeHasHTTPBinOrgPinnedCertificate() {
    let pinned = Fixtures.certificates("httpbin-fullchain.pem")
    let policy = policy(.publicKey, pinned: pinned)
    let matches = policy.pinnedCertificates.filter { $0.der == httpBinOrgCertificate.der }
    XCTAssertEqual(matches.count, 1)
  }

  // MARK: Public key pinning: positive evaluation

  func testPolicyWithPublicKeyPinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgLeafCertificatePinned() {
    assertTrusted(policy(.publicKey, pinned: [httpBinOrgCertificate]), httpBinOrgServerTrust, domain: nil)
  }

  func testPolicyWithPublicKeyPinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgIntermediateCertificatePinned()
  {
    assertTrusted(
      policy(.publicKey, pinned: [letsEncryptAuthorityCertificate]), httpBinOrgServerTrust, domain: nil)
  }

  func testPolicyWithPublicKeyPinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgRootCertificatePinned() {
    assertTrusted(policy(.publicKey, pinned: [dstRootCertificate]), httpBinOrgServerTrust, domain: nil)
  }

  func testPolicyWithPublicKeyPinningAllowsHTTPBinOrgServerTrustWithEntireCertificateChainPinned() {
    let pinned = [httpBinOrgCertificate, letsEncryptAuthorityCertificate, dstRootCertificate]
    assertTrusted(policy(.publicKey, pinned: pinned), httpBinOrgServerTrust, domain: nil)
  }

  func
    testPolicyWithPublicKeyPinningAllowsHTTPBirnOrgServerTrustWithHTTPbinOrgPinnedCertificateAndAdditionalPinnedCertificates()
  {
    let pinned = [httpBinOrgCertificate, Fixtures.certificate(selfSignedCertificateWithCommonNameDomain)]
    assertTrusted(policy(.publicKey, pinned: pinned), httpBinOrgServerTrust, domain: nil)
  }

  func
    testPolicyWithPublicKeyPinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgLeafCertificatePinnedAndValidDomainName()
  {
    assertTrusted(
      policy(.publicKey, pinned: [httpBinOrgCertificate]), httpBinOrgServerTrust, domain: "httpbin.org")
  }

  // MARK: Public key pinning: negative evaluation

  func testPolicyWithPublicKeyPinningAndNoPinnedCertificatesDoesNotAllowHTTPBinOrgServerTrust() {
    assertRejected(policy(.publicKey), httpBinOrgServerTrust, domain: nil, code: .noPins)
  }

  func testPolicyWithPublicKeyPinningDoesNotAllowADNServerTrustWithHTTPBinOrgPinnedCertificate() {
    assertRejected(
      policy(.publicKey, pinned: [httpBinOrgCertificate]), adnNetServerTrust, domain: nil, code: .pinMismatch)
  }

  func
    testPolicyWithPublicKeyPinningDoesNotAllowHTTPBinOrgServerTrustWithHTTPBinOrgLeafCertificatePinnedAndInvalidDomainName()
  {
    assertRejected(
      policy(.publicKey, pinned: [httpBinOrgCertificate]), httpBinOrgServerTrust,
      domain: "invaliddomainname.com",
      code: .hostnameMismatch)
  }

  func testPolicyWithPublicKeyPinningDoesNotAllowADNServerTrustWithMultipleInvalidPinnedCertificates() {
    let pinned = [httpBinOrgCertificate, Fixtures.certificate(selfSignedCertificateWithCommonNameDomain)]
    assertRejected(policy(.publicKey, pinned: pinned), adnNetServerTrust, domain: nil, code: .pinMismatch)
  }

  // MARK: - Certificate pinning: default values

  func testPolicyWithCertificatePinningModeHasPinnedCertificates() {
    let pinned = Fixtures.certificates("httpbin-fullchain.pem")
    XCTAssertGreaterThan(policy(.certificate, pinned: pinned).pinnedCertificates.count, 0)
    XCTAssertEqual(policy(.certificate, pinned: pinned).pinCount, 3)
  }

  func testPolicyWithCertificatePinningModeHasHTTPBinOrgPinnedCertificate() {
    let policy = policy(.certificate, pinned: Fixtures.certificates("httpbin-fullchain.pem"))
    XCTAssertEqual(policy.pinnedCertificates.filter { $0.der == httpBinOrgCertificate.der }.count, 1)
  }

  // MARK: Certificate pinning: positive evaluation

  func testPolicyWithCertificatePinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgLeafCertificatePinned() {
    assertTrusted(policy(.certificate, pinned: [httpBinOrgCertificate]), httpBinOrgServerTrust, domain: nil)
  }

  func
    testPolicyWithCertificatePinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgIntermediateCertificatePinned()
  {
    assertTrusted(
      policy(.certificate, pinned: [letsEncryptAuthorityCertificate]), httpBinOrgServerTrust, domain: nil)
  }

  func testPolicyWithCertificatePinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgRootCertificatePinned() {
    assertTrusted(policy(.certificate, pinned: [dstRootCertificate]), httpBinOrgServerTrust, domain: nil)
  }

  func testPolicyWithCertificatePinningAllowsHTTPBinOrgServerTrustWithEntireCertificateChainPinned() {
    let pinned = [httpBinOrgCertificate, letsEncryptAuthorityCertificate, dstRootCertificate]
    assertTrusted(policy(.certificate, pinned: pinned), httpBinOrgServerTrust, domain: nil)
  }

  func
    testPolicyWithCertificatePinningAllowsHTTPBirnOrgServerTrustWithHTTPbinOrgPinnedCertificateAndAdditionalPinnedCertificates()
  {
    let pinned = [httpBinOrgCertificate, Fixtures.certificate(selfSignedCertificateWithCommonNameDomain)]
    assertTrusted(policy(.certificate, pinned: pinned), httpBinOrgServerTrust, domain: nil)
  }

  func
    testPolicyWithCertificatePinningAllowsHTTPBinOrgServerTrustWithHTTPBinOrgLeafCertificatePinnedAndValidDomainName()
  {
    assertTrusted(
      policy(.certificate, pinned: [httpBinOrgCertificate]), httpBinOrgServerTrust, domain: "httpbin.org")
  }

  // MARK: Certificate pinning: negative evaluation

  func testPolicyWithCertificatePinningAndNoPinnedCertificatesDoesNotAllowHTTPBinOrgServerTrust() {
    assertRejected(policy(.certificate), httpBinOrgServerTrust, domain: nil, code: .noPins)
  }

  func testPolicyWithCertificatePinningDoesNotAllowADNServerTrustWithHTTPBinOrgPinnedCertificate() {
    assertRejected(
      policy(.certificate, pinned: [httpBinOrgCertificate]), adnNetServerTrust, domain: nil,
      code: .pinMismatch)
  }

  func
    testPolicyWithCertificatePinningDoesNotAllowHTTPBinOrgServerTrustWithHTTPBinOrgLeafCertificatePinnedAndInvalidDomainName()
  {
    assertRejected(
      policy(.certificate, pinned: [httpBinOrgCertificate]), httpBinOrgServerTrust,
      domain: "invaliddomainname.com",
      code: .hostnameMismatch)
  }

  func testPolicyWithCertificatePinningDoesNotAllowADNServerTrustWithMultipleInvalidPinnedCertificates() {
    let pinned = [httpBinOrgCertificate, Fixtures.certificate(selfSignedCertificateWithCommonNameDomain)]
    assertRejected(policy(.certificate, pinned: pinned), adnNetServerTrust, domain: nil, code: .pinMismatch)
  }

  // MARK: - Domain name validation: positive

  func testThatPolicyWithoutDomainNameValidationAllowsServerTrustWithInvalidDomainName() {
    var policy = SecurityPolicy.default
    policy.validatesDomainName = false
    assertTrusted(policy, httpBinOrgServerTrust, domain: "invalid.org")
  }

  func testThatPolicyWithDomainNameValidationAndSelfSignedCommonNameCertificateAllowsServerTrust() {
    var policy = policy(.publicKey, pinned: [Fixtures.certificate(selfSignedCertificateWithCommonNameDomain)])
    policy.allowInvalidCertificates = true
    assertTrusted(policy, selfSignedCertificateWithCommonNameDomain, domain: "foobar.com")
  }

  func testThatPolicyWithDomainNameValidationAndSelfSignedDNSCertificateAllowsServerTrust() {
    var policy = policy(.publicKey, pinned: [Fixtures.certificate(selfSignedCertificateWithDNSNameDomain)])
    policy.allowInvalidCertificates = true
    assertTrusted(policy, selfSignedCertificateWithDNSNameDomain, domain: "foobar.com")
  }

  // MARK: Domain name validation: negative

  func testThatPolicyWithDomainNameValidationDoesNotAllowServerTrustWithInvalidDomainName() {
    assertRejected(.default, httpBinOrgServerTrust, domain: "invalid.org", code: .hostnameMismatch)
  }

  func testThatPolicyWithDomainNameValidationAndSelfSignedNoDomainCertificateDoesNotAllowServerTrust() {
    var policy = policy(.certificate, pinned: [Fixtures.certificate(selfSignedCertificateWithoutDomain)])
    policy.allowInvalidCertificates = true
    assertRejected(policy, selfSignedCertificateWithoutDomain, domain: "foobar.com", code: .hostnameMismatch)
  }

  // MARK: - Self-signed certificates: positive

  func testThatPolicyWithInvalidCertificatesAllowedAllowsSelfSignedServerTrust() {
    var policy = SecurityPolicy.default
    policy.allowInvalidCertificates = true
    assertTrusted(policy, selfSignedCertificateWithDNSNameDomain, domain: nil)
  }

  func
    testThatPolicyWithInvalidCertificatesAllowedAndValidPinnedCertificatesDoesAllowSelfSignedServerTrustForValidDomainName()
  {
    var policy = policy(.publicKey, pinned: [Fixtures.certificate(selfSignedCertificateWithDNSNameDomain)])
    policy.allowInvalidCertificates = true
    assertTrusted(policy, selfSignedCertificateWithDNSNameDomain, domain: "foobar.com")
  }

  func
    testThatPolicyWithInvalidCertificatesAllowedAndNoSSLPinningAndDomainNameValidationDisabledDoesAllowSelfSignedServerTrustForValidDomainName()
  {
    var policy = policy(.none)
    policy.allowInvalidCertificates = true
    policy.validatesDomainName = false
    assertTrusted(policy, selfSignedCertificateWithDNSNameDomain, domain: "foobar.com")
  }

  // MARK: Self-signed certificates: negative

  func testThatPolicyWithInvalidCertificatesDisabledDoesNotAllowSelfSignedServerTrust() {
    assertRejected(.default, selfSignedCertificateWithDNSNameDomain, domain: nil, code: .untrustedChain)
  }

  func
    testThatPolicyWithInvalidCertificatesAllowedAndNoPinnedCertificatesAndPublicKeyPinningModeDoesNotAllowSelfSignedServerTrustForValidDomainName()
  {
    var policy = policy(.publicKey)
    policy.allowInvalidCertificates = true
    assertRejected(
      policy, selfSignedCertificateWithDNSNameDomain, domain: "foobar.com", code: .selfSignedRequiresPinning)
  }

  func
    testThatPolicyWithInvalidCertificatesAllowedAndValidPinnedCertificatesAndNoPinningModeDoesNotAllowSelfSignedServerTrustForValidDomainName()
  {
    var policy = policy(.none, pinned: [Fixtures.certificate(selfSignedCertificateWithDNSNameDomain)])
    policy.allowInvalidCertificates = true
    assertRejected(
      policy, selfSignedCertificateWithDNSNameDomain, domain: "foobar.com", code: .selfSignedRequiresPinning)
  }

  func
    testThatPolicyWithInvalidCertificatesAllowedAndNoValidPinnedCertificatesAndNoPinningModeAndDomainValidationDoesNotAllowSelfSignedServerTrustForValidDomainName()
  {
    var policy = policy(.none)
    policy.allowInvalidCertificates = true
    assertRejected(
      policy, selfSignedCertificateWithDNSNameDomain, domain: "foobar.com", code: .selfSignedRequiresPinning)
  }

  // MARK: - Copying and encoding

  /// AF's NSCopying: our policy is a value, so a copy is independent and equal.
  func testThatPolicyCanBeCopied() {
    var policy = policy(.certificate, pinned: [httpBinOrgCertificate])
    policy.allowInvalidCertificates = true
    policy.validatesDomainName = false
    var copied = policy
    XCTAssertEqual(copied, policy)
    XCTAssertEqual(copied.allowInvalidCertificates, policy.allowInvalidCertificates)
    XCTAssertEqual(copied.validatesDomainName, policy.validatesDomainName)
    XCTAssertEqual(copied.pinningMode, policy.pinningMode)
    XCTAssertEqual(Set(copied.pinnedCertificates), Set(policy.pinnedCertificates))
    copied.pinningMode = .publicKey
    XCTAssertEqual(policy.pinningMode, .certificate, "changing the copy must not change the original")
  }
}

extension AFSecurityPolicyTests {
  /// AF's NSSecureCoding round trip; ours is the configuration file: a policy
  /// written as a domain rule and read back equals the one built in code.
  func testThatPolicyCanBeEncodedAndDecoded() throws {
    var policy = policy(.certificate, pinned: [httpBinOrgCertificate])
    policy.allowInvalidCertificates = true
    policy.validatesDomainName = false
    let yaml = """
      domains:
        - domain: httpbin.org
          pinningMode: certificate
          pinnedCertificates: ["\(Fixtures.path("httpbin.pem"))"]
          allowInvalidCertificates: true
          validatesDomainName: false
      """
    let configuration = try ConfigurationParser.parse(yaml, file: "/tmp/encoded.yaml")
    let snapshot = try TrustSnapshot.compile(configuration, generation: 1)
    XCTAssertEqual(snapshot.domainPolicies.first?.policy, policy)
  }
}
