import Foundation
import PinConfig
import PinProxy
import PinTestSupport
import PinTrust
import XCTest

final class ConfigurationParserTests: XCTestCase {
  func parse(_ text: String) -> Result<Configuration, ConfigErrors> {
    Result { () throws(ConfigErrors) in
      try ConfigurationParser.parse(text, file: "/etc/pinproxy/pinproxy.yaml")
    }
  }

  func errors(_ text: String) -> [String] {
    if case .failure(let failure) = parse(text) { return failure.errors.map(\.description) }
    return []
  }

  func testTheDocumentedExampleIsValidAndComplete() throws {
    let file = Fixtures.repositoryRoot + "/config/pinproxy.yaml"
    let configuration = try ConfigurationParser.load(file: file)
    XCTAssertEqual(configuration.listeners.first?.address.description, "127.0.0.1:3128")
    XCTAssertEqual(
      configuration.domains.map(\.domain.description),
      ["api.bank.example", "api.wallet.example", "pay.bank.example", "bank.example"])
    XCTAssertEqual(configuration.domains[2].pinnedLeafPublicKeyHashes.count, 1)
    XCTAssertEqual(configuration.domains[2].pinnedCAPublicKeyHashes.count, 1)
    XCTAssertEqual(configuration.domains[2].pinsExpire, ConfigValues.date("2030-01-01"))
    XCTAssertTrue(configuration.domains[2].requiresCertificateTransparency)
    XCTAssertEqual(configuration.certificateTransparency?.minimumSCTs, 2)
    XCTAssertEqual(configuration.domains[1].dynamicPins?.expectedCommonNames, ["api.wallet.example"])
    XCTAssertEqual(
      configuration.domains[1].report?.uris.map(\.uri), ["https://reports.wallet.example/pin-failure"])
    XCTAssertEqual(
      configuration.anchorSets.first?.files.first?.path,
      Fixtures.repositoryRoot + "/config/examples/national-root.pem")
    let snapshot = try TrustSnapshot.compile(configuration, generation: 1)
    XCTAssertEqual(snapshot.transparency?.list.entries.count, 3)
    guard case .rule(_, let domain, _) = snapshot.route(Fixtures.host("cards.bank.example")) else {
      return XCTFail("bank.example with includesSubdomains must govern cards.bank.example")
    }
    XCTAssertEqual(domain.domain, .dns("bank.example"))
  }

  func testUnknownKeyNamesFileLineAndKey() {
    let found = errors(
      """
      domains:
        - domain: example.com
          pinningMod: publicKey
      """)
    XCTAssertEqual(found.count, 1)
    XCTAssertTrue(
      found[0].hasPrefix("/etc/pinproxy/pinproxy.yaml:3:5: domains[0].pinningMod: unknown key"), found[0])
  }

  /// Values are exact, but "did you mean" ignores case.
  func testAValueInTheWrongCaseGetsTheRightSpellingSuggested() {
    let found = errors(
      """
      domains:
        - domain: example.com
          pinningMode: publickey
      """)
    XCTAssertEqual(found.count, 1, "\(found)")
    XCTAssertTrue(found.first?.hasSuffix("; did you mean publicKey?") ?? false, "\(found)")
  }

  func testEveryErrorIsReportedNotJustTheFirst() {
    let found = errors(
      """
      listeners:
        - name: forward
          address: 127.0.0.1:99999
      defaults:
        action: allow
      domains:
        - domain: example.com
          pinningMode: publicKey
          pinnedPublicKeyHashes: ["sha256/tooshort", "AAAA"]
          validatesDomainName: maybe
        - includesSubdomains: true
      """)
    let joined = found.joined(separator: "\n")
    XCTAssertEqual(found.count, 6, joined)
    XCTAssertTrue(
      joined.contains(":3:14: listeners[0].address: \"127.0.0.1:99999\" is not HOST:PORT"), joined)
    XCTAssertTrue(joined.contains(":5:11: defaults.action: \"allow\" is not one of: validate, deny"), joined)
    XCTAssertTrue(
      joined.contains("domains[0].pinnedPublicKeyHashes[0]: pin \"sha256/tooshort\" is not standard base64"),
      joined)
    XCTAssertTrue(
      joined.contains("domains[0].pinnedPublicKeyHashes[1]: pin \"AAAA\" must be written sha256/"), joined)
    XCTAssertTrue(joined.contains(":10:26: domains[0].validatesDomainName: expected true or false"), joined)
    XCTAssertTrue(joined.contains("domains[1].domain: required key is missing"), joined)
  }

  func testDuplicateDomainsAreRefused() {
    let found = errors(
      """
      domains:
        - domain: Example.com
        - domain: example.COM.
      """)
    XCTAssertEqual(found.count, 1)
    XCTAssertTrue(
      found[0].contains(":3:5: domains[1]: domain example.com is already configured at line 2"), found[0])
  }

  func testPinsWithModeNoneAreRefusedRatherThanIgnored() {
    let found = errors(
      """
      domains:
        - domain: example.com
          pinnedPublicKeyHashes: ["sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="]
      """)
    XCTAssertTrue(found.first?.contains("pinningMode is none") ?? false, "\(found)")
  }

  func testYAMLSyntaxErrorIsLocated() {
    let found = errors("domains:\n  - domain: [unclosed\n")
    XCTAssertEqual(found.count, 1)
    XCTAssertTrue(found[0].hasPrefix("/etc/pinproxy/pinproxy.yaml:3:"), found[0])
  }

  func testTunnelListenerNeedsAnUpstreamAndForwardMayNotHaveOne() {
    let found = errors(
      """
      listeners:
        - {name: a, address: "127.0.0.1:8443", mode: tunnel}
        - {name: b, address: "127.0.0.1:3128", upstream: "api.example:443"}
        - {name: b, address: "[::1]:3129"}
      """)
    let joined = found.joined(separator: "\n")
    XCTAssertTrue(joined.contains("listeners[0].upstream: required key is missing"), joined)
    XCTAssertTrue(
      joined.contains("listeners[1].upstream: only tunnel listeners have a fixed upstream"), joined)
    XCTAssertTrue(joined.contains("listener name \"b\" is used twice"), joined)
  }

  func testValuesAndDefaults() throws {
    let configuration = try parse(
      """
      stateDirectory: state
      connectTo: ["api.bank.example:443:127.0.0.1:9443"]
      domains:
        - domain: bücher.example
          includesSubdomains: true
          dynamicPins:
            url: https://pins.example/list.json
            publicKey: BC3kV9OI
            updateInterval: 12h
      """
    ).get()
    XCTAssertEqual(configuration.stateDirectory, "/etc/pinproxy/state")
    XCTAssertEqual(
      configuration.connectTo,
      [
        ConnectToRule(
          from: HostPort(host: "api.bank.example", port: 443), to: HostPort(host: "127.0.0.1", port: 9443))
      ])
    let domain = try XCTUnwrap(configuration.domains.first)
    XCTAssertEqual(domain.domain, .dns("xn--bcher-kva.example"))
    XCTAssertEqual(domain.anchors, ["system"])
    XCTAssertTrue(domain.validatesDomainName)
    XCTAssertFalse(domain.allowInvalidCertificates)
    XCTAssertEqual(domain.minimumTLSVersion, .tls12)
    XCTAssertEqual(domain.dynamicPins?.updateInterval, 43_200)
    XCTAssertEqual(domain.dynamicPins?.expirationUpdateThreshold, 14 * 86_400)
  }
}
