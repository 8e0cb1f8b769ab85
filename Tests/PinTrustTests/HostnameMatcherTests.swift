import Foundation
import PinTrust
import XCTest

final class HostnameMatcherTests: XCTestCase {
  func leaf(dns: [String] = [], ip: [String] = [], cn: String? = nil) -> Certificate {
    .stub(commonName: cn, dns: dns, ip: ip)
  }

  func matches(_ patterns: [String], _ host: String) -> Bool {
    HostnameMatcher.matches(leaf(dns: patterns), host: TrustHost(host)!)
  }

  func testExactNamesMatchCaseInsensitivelyIgnoringTheHostsTrailingDot() {
    XCTAssertTrue(matches(["Example.COM"], "example.com"))
    XCTAssertTrue(matches(["example.com"], "EXAMPLE.com."))
    // A trailing dot in the certificate is outside preferred name syntax.
    XCTAssertFalse(matches(["example.com."], "example.com"))
    XCTAssertFalse(matches(["example.com"], "www.example.com"))
    XCTAssertFalse(matches(["www.example.com"], "example.com"))
  }

  func testWildcardOnlyAsTheWholeLeftmostLabelAndOneLabelDeep() {
    XCTAssertTrue(matches(["*.example.com"], "a.example.com"))
    XCTAssertTrue(matches(["*.EXAMPLE.com"], "A-b.Example.com"))
    XCTAssertFalse(matches(["*.example.com"], "example.com"))
    XCTAssertFalse(matches(["*.example.com"], "a.b.example.com"))
    XCTAssertFalse(matches(["f*.example.com"], "foo.example.com"))
    XCTAssertFalse(matches(["*oo.example.com"], "foo.example.com"))
    XCTAssertFalse(matches(["www.*.example.com"], "www.a.example.com"))
    XCTAssertFalse(matches(["*.*.example.com"], "a.b.example.com"))
    XCTAssertFalse(matches(["*"], "localhost"))
  }

  func testWildcardNeedsTwoLabelsAfterIt() {
    XCTAssertFalse(matches(["*.com"], "example.com"))
    XCTAssertTrue(
      matches(["*.co.uk"], "example.co.uk"), "two labels suffice; public-suffix lists are out of scope")
  }

  func testCommonNameIsNeverConsulted() {
    XCTAssertFalse(HostnameMatcher.matches(leaf(cn: "example.com"), host: TrustHost("example.com")!))
    XCTAssertFalse(
      HostnameMatcher.matches(leaf(dns: ["other.com"], cn: "example.com"), host: TrustHost("example.com")!))
  }

  func testIPHostsMatchIPEntriesOnlyAndNeverDNSEntries() {
    let certificate = leaf(dns: ["127.0.0.1", "*.0.0.1"], ip: ["10.1.2.3", "2001:db8::1"])
    XCTAssertTrue(HostnameMatcher.matches(certificate, host: TrustHost("10.1.2.3")!))
    XCTAssertTrue(HostnameMatcher.matches(certificate, host: TrustHost("[2001:DB8:0::1]")!))
    XCTAssertFalse(HostnameMatcher.matches(certificate, host: TrustHost("127.0.0.1")!))
    XCTAssertFalse(HostnameMatcher.matches(certificate, host: TrustHost("10.1.2.4")!))
  }

  func testUnicodeHostMatchesItsALabelInTheCertificate() {
    XCTAssertTrue(matches(["xn--bcher-kva.example"], "Bücher.example"))
    XCTAssertTrue(matches(["*.xn--bcher-kva.example"], "www.bücher.example"))
  }
}

final class TrustHostTests: XCTestCase {
  func testNormalisation() {
    XCTAssertEqual(TrustHost("WWW.Example.COM."), .dns("www.example.com"))
    XCTAssertEqual(TrustHost("bücher.example"), .dns("xn--bcher-kva.example"))
    XCTAssertEqual(TrustHost("münchen.de"), .dns("xn--mnchen-3ya.de"))
    XCTAssertEqual(TrustHost("_service.example.com"), .dns("_service.example.com"))
  }

  func testPunycodeRFC3492Samples() {
    // RFC 3492 §7.1 (L) and a mixed-case label, lower-cased first.
    XCTAssertEqual(TrustHost("3年B組金八先生.example"), .dns("xn--3b-ww4c5e180e575a65lsy2b.example"))
    XCTAssertEqual(TrustHost("ПРИМЕР.рф"), TrustHost("пример.рф"))
    XCTAssertEqual(TrustHost("пример.рф"), .dns("xn--e1afmkfd.xn--p1ai"))
  }

  func testIPAddresses() {
    XCTAssertEqual(TrustHost("192.0.2.1"), .ip(IPAddress(bytes: [192, 0, 2, 1])!))
    XCTAssertEqual(TrustHost("[::1]")?.description, "[::1]")
    XCTAssertEqual(
      TrustHost("::ffff:192.0.2.1"),
      .ip(IPAddress(bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1])!))
    XCTAssertEqual(IPAddress("2001:db8:0:0:1:0:0:1")?.description, "2001:db8::1:0:0:1")
    XCTAssertEqual(IPAddress("fe80::")?.description, "fe80::")
    // RFC 5952 §5: an IPv4-mapped address keeps its dotted IPv4 part.
    XCTAssertEqual(IPAddress("::ffff:7f00:1")?.description, "::ffff:127.0.0.1")
    XCTAssertEqual(
      IPAddress(bytes: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 192, 0, 2, 7])?.description,
      "::ffff:192.0.2.7")
    XCTAssertEqual(IPAddress("::fffe:7f00:1")?.description, "::fffe:7f00:1", "only the mapped prefix")
  }

  /// The spellings resolvers accept (inet_aton) name the address they resolve
  /// to, so every decision is about the address actually connected to.
  func testLegacyNumericSpellingsNameTheAddressTheResolverUses() {
    for (spelling, address) in [
      ("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("0x7F.1", "127.0.0.1"),
      ("127.1", "127.0.0.1"),
      ("0177.0.0.1", "127.0.0.1"), ("010.0.0.1", "8.0.0.1"), ("192.168.1", "192.168.0.1"),
      ("0x7f.0.0.0x1", "127.0.0.1"),
      ("127.0.0.1.", "127.0.0.1"),
    ] {
      XCTAssertEqual(TrustHost(spelling), .ip(IPAddress(address)!), spelling)
    }
  }

  func testMalformedHostsAreRefused() {
    for bad in [
      "", ".", "a..b", "exa mple.com", "1.2.3.256", "[example.com]", "a/b", "1.2.3.4.5", "4294967296",
      "1.2.65536", "09.1.1.1",
      "[1.2.3.4]", "1:2:3:4:5:6:7:8:9", "12345::", "example.123", String(repeating: "a", count: 64) + ".com",
      "*.example.com",
    ] {
      XCTAssertNil(TrustHost(bad), "\(bad) must not parse")
    }
  }
}
