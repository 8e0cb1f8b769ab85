import XCTest

@testable import PinConfig

/// `parentProxies` and the `parentProxy` choices as the parser reads them:
/// both kinds of parent, and every mistake named at its file, line and key
/// — credentials in a URL above all, which would end up in logs.
final class ParentProxyConfigTests: XCTestCase {
  let file = "/etc/pinproxy/pinproxy.yaml"

  func parse(_ text: String) -> (Configuration?, [ConfigError]) {
    ConfigurationParser.parseCollecting(text, file: file)
  }

  func testBothKindsOfParentAndTheChoicesOfRulesAndDefaults() throws {
    let (parsed, errors) = parse(
      """
      parentProxies:
        corp: {url: "http://proxy.corp.example:8080", credentialsFile: corp.credentials}
        socks: {url: "socks5://[2001:db8::5]:1080/"}
      defaults: {parentProxy: corp}
      domains:
        - {domain: api.bank.example, parentProxy: socks}
        - {domain: intranet.example, parentProxy: direct}
        - {domain: other.example}
      """)
    XCTAssertEqual(errors.map(\.description), [])
    let configuration = try XCTUnwrap(parsed)
    let corp = try XCTUnwrap(configuration.parentProxies.first { $0.name == "corp" })
    XCTAssertEqual(corp.kind, .http)
    XCTAssertEqual(corp.host, "proxy.corp.example")
    XCTAssertEqual(corp.port, 8080)
    XCTAssertEqual(corp.credentialsFile?.path, "/etc/pinproxy/corp.credentials")
    XCTAssertEqual(corp.url, "http://proxy.corp.example:8080")
    let socks = try XCTUnwrap(configuration.parentProxies.first { $0.name == "socks" })
    XCTAssertEqual(socks.kind, .socks5)
    XCTAssertEqual(socks.host, "2001:db8::5")
    XCTAssertEqual(socks.url, "socks5://[2001:db8::5]:1080")
    XCTAssertNil(socks.credentialsFile)
    XCTAssertEqual(configuration.defaults.parentProxy, .parent("corp"))
    XCTAssertEqual(configuration.domains.map(\.parentProxy), [.parent("socks"), .direct, nil])
  }

  func testEveryMistakeIsNamedAtItsKey() {
    let cases: [(String, String, String)] = [
      ("{url: \"http://alice:secret@proxy:8080\"}", "parentProxies.p.url", "credentialsFile"),
      ("{url: \"https://proxy:8443\"}", "parentProxies.p.url", "not one of http, socks5"),
      ("{url: \"http://proxy\"}", "parentProxies.p.url", "needs its port"),
      ("{url: \"http://proxy:0\"}", "parentProxies.p.url", "1 to 65535"),
      ("{url: \"socks5://proxy:1080/path\"}", "parentProxies.p.url", "no path"),
      ("{url: \"proxy:8080\"}", "parentProxies.p.url", "not a URL"),
      ("{credentialsFile: x}", "parentProxies.p.url", "required"),
      ("{url: \"http://proxy:8080\", password: x}", "parentProxies.p.password", "unknown key"),
    ]
    for (entry, key, words) in cases {
      let (_, errors) = parse("parentProxies:\n  p: \(entry)\n")
      XCTAssertTrue(
        errors.contains { $0.key == key && $0.line == 2 && $0.description.contains(words) },
        "\(entry): \(errors.map(\.description))")
      XCTAssertFalse(errors.contains { $0.description.contains("secret") }, "a password is never echoed")
    }
    let (_, reserved) = parse("parentProxies:\n  direct: {url: \"http://proxy:8080\"}\n")
    XCTAssertTrue(reserved.contains { $0.description.contains("means no parent proxy") }, "\(reserved)")
  }

  func testAChoiceMustNameADefinedParent() {
    let (_, errors) = parse(
      """
      parentProxies:
        corp: {url: "http://proxy:8080"}
      defaults: {parentProxy: cropr}
      domains:
        - {domain: a.example, parentProxy: nowhere}
      """)
    XCTAssertTrue(
      errors.contains {
        $0.key == "defaults.parentProxy" && $0.line == 3 && $0.description.contains("defined: corp")
      },
      "\(errors.map(\.description))")
    XCTAssertTrue(
      errors.contains {
        $0.line == 5 && $0.key.hasSuffix("parentProxy") && $0.description.contains("\"nowhere\"")
      },
      "\(errors.map(\.description))")
  }
}
