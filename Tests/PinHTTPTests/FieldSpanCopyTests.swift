import XCTest

@testable import PinHTTP

/// The forwarded fields are copied from the received head in spans where a
/// line already reads `Name: value` CRLF: whatever the spelling, what is
/// written must be exactly the field-by-field form of the kept fields.
final class FieldSpanCopyTests: XCTestCase {
  private func fieldByField(_ headers: HTTPHeaders, dropping dropped: Set<String>) -> [UInt8] {
    var bytes: [UInt8] = []
    for field in headers where !dropped.contains(field.name.lowercased()) {
      bytes += Array("\(field.name): ".utf8) + field.valueBytes + [0x0d, 0x0a]
    }
    return bytes
  }

  private func spans(_ headers: HTTPHeaders, dropping dropped: Set<String>) -> [UInt8] {
    var bytes: [UInt8] = [0x2a]  // written after what is already there
    headers.appendFields(to: &bytes) { _, name in
      !dropped.contains(String(decoding: name, as: UTF8.self).lowercased())
    }
    return Array(bytes.dropFirst())
  }

  func testEverySpellingIsWrittenAsTheFieldByFieldForm() throws {
    let spellings = [
      "A: 1", "B:2", "C:  3", "D:\t4", "E: 5 ", "F: 6\t", "G:", "H: ", "Host: h",
      "X-Long: "
        + String(repeating: "v", count: 40), "I: a b  c", "J: \u{e9}",
    ]
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<400 {
      let lines = (0..<Int.random(in: 1...8, using: &generator)).map { _ in
        spellings.randomElement(using: &generator)!
      }
      let section = Array(lines.joined(separator: "\r\n").utf8)
      var headers = try HTTP1Grammar.fields(section[...], in: section, limits: HTTPLimits())
      if Bool.random(using: &generator) { headers.add("Added", "yes") }
      let dropped: Set<String> = Set(
        ["a", "c", "g", "host", "added"].filter { _ in Bool.random(using: &generator) })
      XCTAssertEqual(
        String(decoding: spans(headers, dropping: dropped), as: UTF8.self),
        String(decoding: fieldByField(headers, dropping: dropped), as: UTF8.self), "\(lines) less \(dropped)")
    }
  }

  func testDecimalsAreWrittenAsTextWouldBe() {
    for value in [0, 1, 9, 10, 99, 100, 200, 404, 999, 1000, 65_535, Int.max, -1, -42, Int.min] {
      var bytes: [UInt8] = []
      HTTPSerializer.appendDecimal(value, to: &bytes)
      XCTAssertEqual(String(decoding: bytes, as: UTF8.self), String(value))
    }
  }
}
