import PinHTTP
import XCTest

final class PrintableTextTests: XCTestCase {
  func testEachDangerousCharacterBecomesAVisibleEscape() {
    let cases: [(String, String)] = [
      ("\u{1B}[31m", "\\u{1B}[31m"), ("\u{07}", "\\u{7}"), ("\u{1B}]0;title\u{07}", "\\u{1B}]0;title\\u{7}"),
      ("a\rb", "a\\u{D}b"), ("a\nb", "a\\u{A}b"), ("\u{85}", "\\u{85}"), ("\u{9B}", "\\u{9B}"),
      ("\u{2028}", "\\u{2028}"), ("\u{2029}", "\\u{2029}"), ("\u{202E}evil", "\\u{202E}evil"),
      ("\u{7F}", "\\u{7F}"),
      ("\u{0}", "\\u{0}"), ("back\\slash", "back\\\\slash"),
    ]
    for (input, expected) in cases {
      XCTAssertEqual(PrintableText.escaped(input), expected, input.debugDescription)
    }
  }

  func testOrdinaryTextIsUnchanged() {
    for text in ["GET /a?b=c", "café", "日本語", "pinproxy: pin-mismatch: [CN=x sha256/AAA=]", ""] {
      XCTAssertEqual(PrintableText.escaped(text), text)
    }
  }
}
