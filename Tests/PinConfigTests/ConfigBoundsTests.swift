import Foundation
import XCTest

@testable import PinConfig

/// Bounds on what one configuration file can make the daemon do: durations
/// that overflow nothing, alias bombs, and error floods.
final class ConfigBoundsTests: XCTestCase {
  func testDurationsAreStrictAndBounded() {
    XCTAssertEqual(ConfigValues.duration("30s"), 30)
    XCTAssertEqual(ConfigValues.duration("1.5m"), 90)
    XCTAssertEqual(ConfigValues.duration("12h"), 43_200)
    XCTAssertEqual(ConfigValues.duration("7d"), 604_800)
    XCTAssertEqual(ConfigValues.duration("45"), 45)
    for bad in [
      "1e12s", "18446744073s", "8d", "nan", "inf", "-5s", "+5s", "0x10", "0", "0s", ".5s", "5.s", "", "s",
      "1.2.3s",
    ] {
      XCTAssertNil(ConfigValues.duration(bad), bad)
    }
    XCTAssertEqual(ConfigValues.duration("14d", maximum: 365 * 86_400), 1_209_600)
  }

  func testEveryTimeoutIsCheckedWithItsKey() {
    let (_, errors) = ConfigurationParser.parseCollecting(
      "timeouts: {clientHeader: 1e12s, idleKeepAlive: 18446744073s, drain: 30s}\n", file: "t.yaml")
    XCTAssertEqual(Set(errors.map(\.key)), ["timeouts.clientHeader", "timeouts.idleKeepAlive"])
  }

  func testAnAliasBombIsOneErrorQuickly() {
    var text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for level in 1...8 {
      let previous = Character(UnicodeScalar(96 + level)!)
      let name = Character(UnicodeScalar(97 + level)!)
      text +=
        "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 10).joined(separator: ", ") + "]\n"
    }
    text += "domains: [*i]\n"
    let started = Date()
    let (configuration, errors) = ConfigurationParser.parseCollecting(text, file: "bomb.yaml")
    XCTAssertNil(configuration)
    XCTAssertEqual(errors.count, 1)
    XCTAssertTrue(errors[0].message.contains("YAML nodes"), errors[0].message)
    XCTAssertLessThan(Date().timeIntervalSince(started), 2)
  }

  func testAThousandMistakesAreListedFiftyTimes() {
    let text = "domains:\n" + String(repeating: "  - {domain: example.com, colour: blue}\n", count: 1000)
    let (_, errors) = ConfigurationParser.parseCollecting(text, file: "many.yaml")
    XCTAssertEqual(errors.count, ConfigErrors.listed + 1)
    XCTAssertTrue(errors.last!.message.hasSuffix("more errors not listed"), errors.last!.message)
  }
}
