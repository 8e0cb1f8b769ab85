import Foundation
import XCTest

@testable import PinConfig

/// The keys of the ATS remainder: identities, pin expiry, transparency.
final class TrustKeysTests: XCTestCase {
  let pin = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="

  func testExpiryDatesAreCalendarDaysInUTCOrInstants() {
    XCTAssertEqual(ConfigValues.date("2027-06-01"), Date(timeIntervalSince1970: 1_811_808_000))
    XCTAssertEqual(ConfigValues.date("2027-06-01T12:00:00Z"), Date(timeIntervalSince1970: 1_811_851_200))
    for bad in ["2027-02-30", "2027-13-01", "27-06-01", "2027/06/01", "tomorrow", "", "2027-06-1x"] {
      XCTAssertNil(ConfigValues.date(bad), bad)
    }
  }

  func testTheNewRuleKeysParse() {
    let (configuration, errors) = ConfigurationParser.parseCollecting(
      """
      certificateTransparency: {logList: logs.json, minimumSCTs: 3}
      domains:
        - domain: a.example
          pinnedLeafPublicKeyHashes: ["\(pin)"]
          pinnedCAPublicKeyHashes: ["\(pin)", "\(pin)"]
          pinsExpire: "2027-06-01"
          requiresCertificateTransparency: true
      """, file: "/etc/pinproxy/t.yaml")
    XCTAssertEqual(errors.map(\.message), [])
    guard let configuration else { return XCTFail("no configuration") }
    let domain = configuration.domains[0]
    XCTAssertEqual(domain.pinnedLeafPublicKeyHashes.count, 1)
    XCTAssertEqual(domain.pinnedCAPublicKeyHashes.count, 2)
    XCTAssertEqual(domain.pinsExpire, ConfigValues.date("2027-06-01"))
    XCTAssertTrue(domain.requiresCertificateTransparency)
    XCTAssertTrue(domain.hasStaticPins)
    XCTAssertEqual(configuration.certificateTransparency?.minimumSCTs, 3)
    XCTAssertEqual(configuration.certificateTransparency?.logList.path, "/etc/pinproxy/logs.json")
  }

  func testEachBadValueIsReportedAtItsKey() {
    let (_, errors) = ConfigurationParser.parseCollecting(
      """
      certificateTransparency: {logList: logs.json, minimumSCTs: 0}
      domains:
        - domain: a.example
          pinnedLeafPublicKeyHashes: ["md5/abc"]
          pinnedCAPublicKeyHashes: []
          pinsExpire: "next year"
      """, file: "t.yaml")
    XCTAssertEqual(
      Set(errors.map(\.key)),
      [
        "certificateTransparency.minimumSCTs", "domains[0].pinnedLeafPublicKeyHashes[0]",
        "domains[0].pinnedCAPublicKeyHashes", "domains[0].pinsExpire",
      ])
  }

  func testExpiryNoticesStartThirtyDaysAhead() {
    var configuration = Configuration(file: "t.yaml")
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    func rule(_ name: String, expires offset: TimeInterval?, pinned: Bool = true) -> DomainConfig {
      var domain = DomainConfig(domain: .init(name)!, location: Location(line: 1, column: 1, key: "domains"))
      if pinned {
        domain.pinnedCAPublicKeyHashes = [.init(base64: "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")!]
      }
      domain.pinsExpire = offset.map { now.addingTimeInterval($0) }
      return domain
    }
    configuration.domains = [
      rule("gone.example", expires: -1), rule("soon.example", expires: 29 * 86_400),
      rule("later.example", expires: 31 * 86_400), rule("never.example", expires: nil),
      rule("unpinned.example", expires: -1, pinned: false),
    ]
    let notices = PinExpiryNotice.notices(for: configuration, at: now)
    XCTAssertEqual(notices.map(\.rule), ["gone.example", "soon.example"])
    XCTAssertEqual(notices.map(\.state), [.expired, .soon])
    XCTAssertTrue(notices[1].message(at: now).contains("in 29 days"), notices[1].message(at: now))
  }
}
