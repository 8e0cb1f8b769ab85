import PinConfig
import PinTrust
import XCTest

@testable @_spi(Fuzzing) import PinProxy

/// The egress guard for hosts no rule names: every special-purpose range
/// refused, IPv6 forms judged by the IPv4 they carry, public space and what
/// `defaults.allowedNetworks` opens let through.
final class EgressGuardTests: XCTestCase {
  let guarded = InternalAddresses(listening: [])

  func refusal(_ text: String, allowing: [String] = []) throws -> String? {
    let blocks = try allowing.map { try AddressBlock.parse($0).get() }
    let address = try XCTUnwrap(IPAddress(text), text)
    return InternalAddresses(listening: [], allowedNetworks: blocks).egressRefusal(address, port: 443)
  }

  func testEveryInternalRangeIsRefusedAndNamed() throws {
    let refused = [
      ("10.1.2.3", "10.0.0.0/8"), ("172.16.0.1", "172.16.0.0/12"), ("172.31.255.255", "172.16.0.0/12"),
      ("192.168.1.1", "192.168.0.0/16"), ("100.64.0.1", "100.64.0.0/10"),
      ("100.127.255.254", "100.64.0.0/10"),
      ("0.1.2.3", "unspecified"), ("169.254.169.254", "metadata"), ("169.254.1.1", "is a link-local address"),
      ("127.0.0.1", "is a loopback address"), ("192.0.0.8", "192.0.0.0/24"), ("224.0.0.1", "224.0.0.0/4"),
      ("239.255.255.250", "224.0.0.0/4"), ("240.0.0.1", "240.0.0.0/4"), ("255.255.255.255", "240.0.0.0/4"),
      ("fd00::1", "fc00::/7"), ("fc12::1", "fc00::/7"), ("fe80::1", "is a link-local address"),
      ("ff02::1", "ff00::/8"),
      ("::1", "is a loopback address"), ("::ffff:10.0.0.1", "10.0.0.0/8"), ("64:ff9b::a01:203", "10.0.0.0/8"),
      ("64:ff9b:1::1", "64:ff9b:1::/48"), ("2002:a01:203::1", "10.1.2.3"),
      ("2002:c0a8:101::", "192.168.0.0/16"),
      // Teredo: the client's IPv4 is the last 32 bits inverted (10.1.2.3 → f5fe:fdfc).
      ("2001:0:4136:e378:8000:63bf:f5fe:fdfc", "10.1.2.3"),
    ]
    for (address, named) in refused {
      let reason = try refusal(address)
      XCTAssertNotNil(reason, address)
      XCTAssertTrue(reason?.contains(named) ?? false, "\(address): \(reason ?? "nil")")
    }
  }

  func testPublicSpaceAndOpenedNetworksPass() throws {
    for address in [
      "93.184.216.34", "8.8.8.8", "2606:4700::1111", "2002:5db8:d822::1", "172.32.0.1", "100.128.0.1",
    ] {
      XCTAssertNil(try refusal(address), address)
    }
    XCTAssertNil(try refusal("10.20.1.1", allowing: ["10.20.0.0/16"]))
    XCTAssertNotNil(try refusal("10.21.1.1", allowing: ["10.20.0.0/16"]))
    XCTAssertNil(try refusal("2002:a14:101::1", allowing: ["10.20.0.0/16"]), "judged by the IPv4 it carries")
    XCTAssertNil(try refusal("fd00::5", allowing: ["fd00::/8"]))
    // Loopback and this machine's own addresses stay closed whatever is opened.
    XCTAssertNotNil(try refusal("127.0.0.1", allowing: ["127.0.0.0/8"]))
  }

  /// As a parent proxy, an address is this proxy's own listener on this
  /// machine's addresses only: a parent elsewhere on the port a wildcard
  /// listener binds is not us. (For a host no rule names, every address on
  /// that port counts: `AdmissionTests.testInternalAddresses`.)
  func testAWildcardListenerIsAParentsOwnOnlyOnThisMachinesAddresses() throws {
    let addresses = InternalAddresses(
      listening: [HostPort(host: "0.0.0.0", port: 3128), HostPort(host: "127.0.0.1", port: 8080)],
      local: [[10, 0, 0, 5]])
    func own(_ text: String, _ port: Int) throws -> Bool {
      addresses.ownListenerAsParent(try XCTUnwrap(IPAddress(text), text), port: port) != nil
    }
    XCTAssertTrue(try own("127.0.0.1", 3128))
    XCTAssertTrue(try own("127.9.9.9", 3128), "all of loopback reaches a wildcard listener")
    XCTAssertTrue(try own("10.0.0.5", 3128), "an interface address of this machine")
    XCTAssertTrue(try own("::ffff:10.0.0.5", 3128), "judged as the IPv4 address it carries")
    XCTAssertTrue(try own("0.0.0.0", 3128))
    XCTAssertFalse(try own("192.0.2.7", 3128), "another host on the same port")
    XCTAssertFalse(try own("10.0.0.6", 3128), "another host on this machine's network")
    XCTAssertFalse(try own("10.0.0.5", 3129), "another port")
    XCTAssertTrue(try own("127.0.0.1", 8080))
    XCTAssertFalse(try own("10.0.0.5", 8080), "a listener on one address is not reached on another")
    let remote = try XCTUnwrap(IPAddress("192.0.2.7"))
    XCTAssertNotNil(
      addresses.ownListener(remote, port: 3128), "for an unnamed host the wildcard stays closed")
  }

  func testCheckWarnsWhenDefaultsOpenANetwork() throws {
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward}
      defaults: {action: validate, allowedNetworks: ["10.20.0.0/16"]}
      """, file: "test.yaml")
    XCTAssertEqual(configuration.defaults.allowedNetworks.map(\.description), ["10.20.0.0/16"])
    let notices = AccessNotice.notices(for: configuration).map(\.message)
    XCTAssertTrue(
      notices.contains { $0.contains("defaults.allowedNetworks opens 10.20.0.0/16") }, "\(notices)")
    XCTAssertThrowsError(
      try ConfigurationParser.parse(
        """
        listeners:
          - {name: forward, address: "127.0.0.1:3128", mode: forward}
        defaults: {allowedNetworks: ["10.20.0.0/33"]}
        """, file: "test.yaml"))
  }
}
