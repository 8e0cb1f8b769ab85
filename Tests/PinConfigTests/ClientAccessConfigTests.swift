import Foundation
import XCTest

@testable import PinConfig

/// `allowedClients`, `proxyAuth`, `allowedClientNames` and the admin access
/// keys as the parser reads them: CIDR blocks, containment, and the
/// fail-closed rule that a listener off loopback must say who may use it.
final class ClientAccessConfigTests: XCTestCase {
  let file = "/etc/pinproxy/pinproxy.yaml"

  func block(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> AddressBlock? {
    switch AddressBlock.parse(text) {
    case .success(let block): return block
    case .failure(let error):
      XCTFail("\(text) must parse: \(error)", file: file, line: line)
      return nil
    }
  }

  func failure(_ text: String) -> AddressBlock.ParseError? {
    if case .failure(let error) = AddressBlock.parse(text) { return error }
    return nil
  }

  func errors(_ text: String) -> [ConfigError] { ConfigurationParser.parseCollecting(text, file: file).1 }

  let v6Loopback: [UInt8] = Array(repeating: 0, count: 15) + [1]
  func mapped(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) -> [UInt8] {
    Array(repeating: 0, count: 10) + [0xff, 0xff, a, b, c, d]
  }

  // MARK: CIDR parsing

  func testValidIPv4AndIPv6NetworksAndSingleAddresses() throws {
    let cases: [(String, [UInt8], Int, String)] = [
      ("10.0.0.0/8", [10, 0, 0, 0], 8, "10.0.0.0/8"),
      ("192.168.1.0/24", [192, 168, 1, 0], 24, "192.168.1.0/24"),
      ("127.0.0.2", [127, 0, 0, 2], 32, "127.0.0.2/32"),
      ("127.0.0.2/32", [127, 0, 0, 2], 32, "127.0.0.2/32"),
      ("0.0.0.0/0", [0, 0, 0, 0], 0, "0.0.0.0/0"),
      ("::1", Array(repeating: 0, count: 15) + [1], 128, "::1/128"),
      ("::/0", Array(repeating: 0, count: 16), 0, "::/0"),
      ("2001:db8::/32", [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 12), 32, "2001:db8::/32"),
    ]
    for (text, network, prefix, description) in cases {
      let parsed = try XCTUnwrap(block(text), text)
      XCTAssertEqual(parsed.network, network, text)
      XCTAssertEqual(parsed.prefix, prefix, text)
      XCTAssertEqual(parsed.description, description, text)
    }
  }

  func testPrefixOutOfRangeAndNonAddressesAreErrors() {
    XCTAssertEqual(failure("10.0.0.0/33"), .prefixOutOfRange("10.0.0.0/33", maximum: 32))
    XCTAssertEqual(failure("2001:db8::/129"), .prefixOutOfRange("2001:db8::/129", maximum: 128))
    XCTAssertEqual(failure("10.0.0.0/-1"), .prefixOutOfRange("10.0.0.0/-1", maximum: 32))
    XCTAssertEqual(failure("10.0.0.0/"), .prefixOutOfRange("10.0.0.0/", maximum: 32))
    XCTAssertEqual(failure("10.0.0.0/+8"), .prefixOutOfRange("10.0.0.0/+8", maximum: 32))
    for bad in ["example.com", "10.0.0", "300.0.0.1/8", "", "/8", "::g/64", "localhost"] {
      XCTAssertEqual(failure(bad), .notAnAddress(bad), bad)
    }
  }

  func testHostBitsBelowThePrefixAreAnErrorThatSuggestsTheNetwork() {
    XCTAssertEqual(failure("192.168.1.1/24"), .hostBitsSet("192.168.1.1/24", meant: "192.168.1.0/24"))
    XCTAssertEqual(failure("10.1.2.3/8"), .hostBitsSet("10.1.2.3/8", meant: "10.0.0.0/8"))
    XCTAssertEqual(failure("2001:db8::1/64"), .hostBitsSet("2001:db8::1/64", meant: "2001:db8::/64"))
    let message = failure("192.168.1.1/24")?.description ?? ""
    XCTAssertTrue(message.contains("did you mean 192.168.1.0/24?"), message)
    // The same through the parser: the entry's own key and line.
    let found = errors(
      """
      listeners:
        - name: forward
          address: "127.0.0.1:3128"
          mode: forward
          allowedClients:
            - 10.0.0.0/8
            - 192.168.1.1/24
      """)
    XCTAssertEqual(found.count, 1, found.map(\.description).joined(separator: "\n"))
    XCTAssertEqual(found.first?.key, "listeners[0].allowedClients[1]")
    XCTAssertEqual(found.first?.line, 7)
    XCTAssertTrue(found.first?.message.contains("did you mean 192.168.1.0/24?") ?? false, "\(found)")
  }

  // MARK: Containment

  func testContainmentIncludingIPv4MappedIPv6() throws {
    let single = try XCTUnwrap(block("127.0.0.2/32"))
    XCTAssertTrue(single.contains([127, 0, 0, 2]))
    XCTAssertFalse(single.contains([127, 0, 0, 3]))
    // What a dual-stack socket reports for an IPv4 client: judged as the IPv4 address.
    XCTAssertTrue(single.contains(mapped(127, 0, 0, 2)))
    XCTAssertFalse(single.contains(mapped(127, 0, 0, 3)))
    let network = try XCTUnwrap(block("10.0.0.0/8"))
    XCTAssertTrue(network.contains([10, 255, 1, 2]))
    XCTAssertFalse(network.contains([11, 0, 0, 0]))
    XCTAssertTrue(network.contains(mapped(10, 9, 8, 7)))
    // Families never match each other (other than through the mapping).
    XCTAssertFalse(try XCTUnwrap(block("0.0.0.0/0")).contains(v6Loopback))
    XCTAssertFalse(try XCTUnwrap(block("::/0")).contains([127, 0, 0, 1]))
    XCTAssertTrue(try XCTUnwrap(block("::/0")).contains(v6Loopback))
    let v6 = try XCTUnwrap(block("2001:db8::/32"))
    XCTAssertTrue(v6.contains([0x20, 0x01, 0x0d, 0xb8, 0xff] + Array(repeating: 1, count: 11)))
    XCTAssertFalse(v6.contains([0x20, 0x01, 0x0d, 0xb9] + Array(repeating: 0, count: 12)))
    // An IPv4 network written as IPv4-mapped IPv6 is the IPv4 network: it
    // holds the plain and the mapped form alike (peers are judged as IPv4).
    let written = try XCTUnwrap(block("::ffff:10.0.0.0/104"))
    XCTAssertEqual(written.description, "10.0.0.0/8")
    XCTAssertTrue(written.contains([10, 1, 2, 3]))
    XCTAssertTrue(written.contains(mapped(10, 1, 2, 3)))
    XCTAssertFalse(written.contains([11, 1, 2, 3]))
    // The loopback default: 127.0.0.0/8 and ::1, nothing else.
    XCTAssertTrue(ClientAddressRules.loopback.allows([127, 1, 2, 3]))
    XCTAssertTrue(ClientAddressRules.loopback.allows(v6Loopback))
    XCTAssertTrue(ClientAddressRules.loopback.allows(mapped(127, 0, 0, 1)))
    XCTAssertFalse(ClientAddressRules.loopback.allows([192, 0, 2, 1]))
    XCTAssertFalse(ClientAddressRules.loopback.allows(Array(repeating: 0, count: 15) + [2]))
  }

  func testParsedRulesAreWhatTheListenerAllows() throws {
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - {name: forward, address: "192.0.2.1:3128", mode: forward, allowedClients: ["192.0.2.2", "2001:db8::/48"]}
        - {name: local, address: "127.0.0.1:3129", mode: forward}
      """, file: file)
    let open = configuration.listeners[0].effectiveAllowedClients
    XCTAssertTrue(open.allows([192, 0, 2, 2]))
    XCTAssertFalse(open.allows([192, 0, 2, 3]))
    XCTAssertFalse(open.allows([127, 0, 0, 1]), "naming networks replaces the loopback default")
    XCTAssertTrue(open.allows([0x20, 0x01, 0x0d, 0xb8, 0, 0, 0xff] + Array(repeating: 0, count: 9)))
    XCTAssertEqual(configuration.listeners[1].allowedClients, nil)
    XCTAssertEqual(configuration.listeners[1].effectiveAllowedClients, .loopback)
  }

  // MARK: Open proxies

  func testAListenerOffLoopbackWithoutRulesIsAnOpenProxyErrorAtItsAddress() {
    let found = errors(
      """
      listeners:
        - name: local
          address: "127.0.0.1:3128"
          mode: forward
        - name: lan
          mode: forward
          address: "0.0.0.0:3128"
      """)
    XCTAssertEqual(found.count, 1, found.map(\.description).joined(separator: "\n"))
    let error = try? XCTUnwrap(found.first)
    XCTAssertEqual(error?.key, "listeners[1].address")
    XCTAssertEqual(error?.line, 7)
    XCTAssertEqual(error?.column, 14)
    XCTAssertTrue(
      error?.description.hasPrefix(
        "\(file):7:14: listeners[1].address: listener lan on 0.0.0.0:3128 would be an open proxy") ?? false,
      error?.description ?? "")
    XCTAssertTrue(error?.message.contains("proxyAuth") ?? false, "a forward listener names proxyAuth")
    // A tunnel listener names downstreamClientCA instead.
    let tunnel = errors(
      """
      listeners:
        - {name: t, address: "[2001:db8::1]:8443", mode: tunnel, upstream: "example.com:443"}
      """)
    XCTAssertEqual(tunnel.count, 1, tunnel.map(\.description).joined(separator: "\n"))
    XCTAssertEqual(tunnel.first?.key, "listeners[0].address")
    XCTAssertTrue(tunnel.first?.message.contains("would be an open proxy") ?? false, "\(tunnel)")
    XCTAssertTrue(tunnel.first?.message.contains("downstreamClientCA") ?? false, "\(tunnel)")
  }

  func testLoopbackAddressesNeedNoRules() {
    for address in ["127.0.0.1:3128", "127.0.0.53:3128", "[::1]:3128", "localhost:3128"] {
      XCTAssertEqual(
        errors("listeners:\n  - {name: l, address: \"\(address)\", mode: forward}\n").map(\.description), [],
        address)
    }
  }

  func testRulesOrProxyAuthMakeAnOffLoopbackListenerLoad() throws {
    XCTAssertEqual(
      errors(
        """
        listeners:
          - {name: lan, address: "0.0.0.0:3128", mode: forward, allowedClients: ["10.0.0.0/8"]}
          - {name: auth, address: "0.0.0.0:3129", mode: forward, proxyAuth: {htpasswd: /etc/pinproxy/users}}
        """
      ).map(\.description), [])
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - {name: auth, address: "0.0.0.0:3129", mode: forward, proxyAuth: {htpasswd: users, realm: "Corp proxy", logUser: true}}
        - {name: defaults, address: "127.0.0.1:3130", mode: forward, proxyAuth: {htpasswd: users}}
      """, file: file)
    let auth = try XCTUnwrap(configuration.listeners[0].proxyAuth)
    XCTAssertEqual(auth.htpasswd.path, "/etc/pinproxy/users", "relative to the configuration file")
    XCTAssertEqual(auth.realm, "Corp proxy")
    XCTAssertTrue(auth.logUser)
    let defaults = try XCTUnwrap(configuration.listeners[1].proxyAuth)
    XCTAssertEqual(defaults.realm, "pinproxy")
    XCTAssertFalse(defaults.logUser)
    // Authenticated and off loopback without rules: anyone may connect, and must authenticate.
    XCTAssertTrue(configuration.listeners[0].effectiveAllowedClients.allows([203, 0, 113, 9]))
  }

  func testOpenToEveryoneOnPurposeLoadsWithANotice() throws {
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - name: lan
          address: "0.0.0.0:3128"
          mode: forward
          allowedClients: ["0.0.0.0/0", "::/0"]
      """, file: file)
    let notices = AccessNotice.notices(for: configuration)
    XCTAssertEqual(notices.count, 1)
    XCTAssertEqual(notices.first?.location?.line, 5)
    XCTAssertEqual(notices.first?.location?.key, "listeners[0].allowedClients")
    XCTAssertTrue(notices.first?.message.contains("IPv4 and IPv6") ?? false, "\(notices)")
    XCTAssertTrue(notices.first?.message.contains("it is an open proxy") ?? false, "\(notices)")
    XCTAssertEqual(ClientAddressRules([block("10.0.0.0/8")!]).openFamilies, [])
  }

  func testAnEmptyListIsAnError() {
    let found = errors(
      "listeners:\n  - {name: l, address: \"127.0.0.1:3128\", mode: forward, allowedClients: []}\n")
    XCTAssertEqual(found.map(\.key), ["listeners[0].allowedClients"])
    XCTAssertTrue(found.first?.message.contains("allows no client") ?? false, "\(found)")
  }

  // MARK: proxyAuth and client names

  func testProxyAuthOnATunnelListenerIsAnError() {
    let found = errors(
      """
      listeners:
        - name: t
          address: "127.0.0.1:8443"
          mode: tunnel
          upstream: "example.com:443"
          proxyAuth: {htpasswd: /etc/pinproxy/users}
      """)
    XCTAssertEqual(
      found.map(\.key), ["listeners[0].proxyAuth"], found.map(\.description).joined(separator: "\n"))
    XCTAssertEqual(found.first?.line, 6)
    XCTAssertTrue(found.first?.message.contains("forward and socks5 listeners") ?? false, "\(found)")
  }

  func testARealmWithAQuoteOrBackslashIsAnError() {
    for realm in [#"'say "hi"'"#, #"'back\slash'"#, "''", "'\(String(repeating: "r", count: 101))'"] {
      let found = errors(
        """
        listeners:
          - name: f
            address: "127.0.0.1:3128"
            mode: forward
            proxyAuth: {htpasswd: /etc/pinproxy/users, realm: \(realm)}
        """)
      XCTAssertEqual(found.map(\.key), ["listeners[0].proxyAuth.realm"], "\(realm): \(found)")
      XCTAssertTrue(found.first?.message.contains("printable ASCII") ?? false, "\(found)")
    }
  }

  func testProxyAuthNeedsAnHtpasswdFileAndKnowsOnlyItsKeys() {
    let missing = errors(
      "listeners:\n  - {name: f, address: \"127.0.0.1:3128\", mode: forward, proxyAuth: {realm: x}}\n")
    XCTAssertFalse(missing.isEmpty)
    XCTAssertTrue(missing.contains { $0.description.contains("htpasswd") }, "\(missing)")
    let unknown = errors(
      "listeners:\n  - {name: f, address: \"127.0.0.1:3128\", mode: forward, proxyAuth: {htpasswd: u, password: x}}\n"
    )
    XCTAssertTrue(unknown.contains { $0.key.hasPrefix("listeners[0].proxyAuth") }, "\(unknown)")
  }

  func testAllowedClientNamesWithoutDownstreamClientCAIsAnError() {
    let found = errors(
      """
      listeners:
        - name: t
          address: "127.0.0.1:8443"
          mode: tunnel
          upstream: "example.com:443"
          downstreamTLS: true
          allowedClientNames: {cn: [device-1]}
      """)
    XCTAssertEqual(
      found.map(\.key), ["listeners[0].allowedClientNames"], found.map(\.description).joined(separator: "\n"))
    XCTAssertTrue(found.first?.message.contains("needs downstreamClientCA") ?? false, "\(found)")
  }

  func testDownstreamClientCAOnAForwardListenerIsAnError() {
    let found = errors(
      """
      listeners:
        - {name: f, address: "127.0.0.1:3128", mode: forward, downstreamClientCA: /etc/pinproxy/ca.pem}
      """)
    XCTAssertEqual(found.map(\.key), ["listeners[0].downstreamClientCA"], "\(found)")
  }

  // MARK: Admin

  func testAdminOffLoopbackNeedsAllowedClientsOrATokenFile() throws {
    let found = errors("admin: {address: \"0.0.0.0:9090\"}\n")
    XCTAssertEqual(found.map(\.key), ["admin.address"], found.map(\.description).joined(separator: "\n"))
    XCTAssertTrue(found.first?.message.contains("would be open") ?? false, "\(found)")
    XCTAssertEqual(errors("admin: {address: \"0.0.0.0:9090\", tokenFile: /etc/pinproxy/token}\n").count, 0)
    XCTAssertEqual(errors("admin: {address: \"0.0.0.0:9090\", allowedClients: [10.0.0.0/8]}\n").count, 0)
    XCTAssertEqual(errors("admin: {address: \"127.0.0.1:9090\"}\n").count, 0)
    let configuration = try ConfigurationParser.parse(
      """
      admin:
        address: "127.0.0.1:9090"
        allowedClients: ["127.0.0.2/32"]
        tokenFile: token
        metricsClients: ["127.0.0.3/32"]
      """, file: file)
    let admin = try XCTUnwrap(configuration.admin)
    XCTAssertEqual(admin.tokenFile?.path, "/etc/pinproxy/token")
    // Who may connect at all: the clients and the scrapers, nobody else.
    XCTAssertTrue(admin.connectingClients.allows([127, 0, 0, 2]))
    XCTAssertTrue(admin.connectingClients.allows([127, 0, 0, 3]))
    XCTAssertFalse(admin.connectingClients.allows([127, 0, 0, 4]))
    XCTAssertFalse(admin.connectingClients.allows([127, 0, 0, 1]))
  }
}
