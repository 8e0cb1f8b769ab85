import XCTest

@testable import PinTrust

/// The byte-level `endsInNumber` (run for every new host a client names)
/// answers as the label-splitting reading does, on every spelling.
final class NumericHostTests: XCTestCase {
  func testTheByteReadingAgreesWithTheLabelReading() {
    let labels = [
      "", "0", "1", "127", "0x", "0X", "0x7f", "0X7F", "0xg1", "0x7f000001", "0177", "08", "a", "example",
      "com",
      "xn--bcher-kva", "1a", "a1", "0xff.", "１２", "0xＡ", "0xａｂ", "é", "-1", "0x-1", "ff", "0xFfFf",
    ]
    var checked = 0
    for first in labels {
      for second in labels {
        for separator in [".", "..", ""] {
          for trailing in ["", ".", ".."] {
            let host = first + separator + second + trailing
            XCTAssertEqual(
              NumericHost.endsInNumber(Substring(host)), NumericHost.endsInNumberSlowly(Substring(host)),
              "\"\(host)\"")
            checked += 1
          }
        }
      }
    }
    XCTAssertEqual(checked, labels.count * labels.count * 9)
  }

  func testNumbersAndNames() {
    for number in ["2130706433", "0x7f000001", "127.1", "0177.0.0.1", "a.0x", "host.123.", "0X7F"] {
      XCTAssertTrue(NumericHost.endsInNumber(Substring(number)), number)
    }
    for name in ["httpbin.org", "example.com.", "1.2.3.a", "0xg", "", ".", "a..", "１２"] {
      XCTAssertFalse(NumericHost.endsInNumber(Substring(name)), name)
    }
  }
}
