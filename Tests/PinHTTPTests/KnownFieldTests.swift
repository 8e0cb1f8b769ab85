import XCTest

@testable import PinHTTP

/// The fields recognised where they are parsed must be found exactly as a
/// name compare would find them, whatever the case, and however the list
/// changed since.
final class KnownFieldTests: XCTestCase {
  private func recognize(_ name: String) -> KnownField? {
    Array(name.utf8).withUnsafeBufferPointer { KnownField.recognize($0) }
  }

  func testEveryKnownNameIsRecognisedInAnyCaseAndNothingElseIs() {
    for field in KnownField.allCases {
      let name = field.name.description
      XCTAssertEqual(recognize(name), field)
      XCTAssertEqual(recognize(name.uppercased()), field)
      XCTAssertEqual(
        recognize(String(name.enumerated().map { $0 % 2 == 0 ? Character($1.uppercased()) : $1 })), field)
      XCTAssertEqual(KnownField.recognize(name), field)
      // One byte changed anywhere, or one more or fewer: another name.
      for index in name.utf8.indices {
        var bytes = Array(name.utf8)
        bytes[name.utf8.distance(from: name.utf8.startIndex, to: index)] ^= 0x01
        XCTAssertNil(bytes.withUnsafeBufferPointer { KnownField.recognize($0) }, "\(bytes)")
      }
      XCTAssertNil(recognize(name + "s"))
      XCTAssertNil(recognize(String(name.dropLast())))
    }
    for other in ["Date", "Server", "Content-Type", "User-Agent", "Accept", "X-Host", "Hosts", "Cookie", ""] {
      XCTAssertNil(recognize(other), other)
    }
  }

  /// Recognised a word at a time: every byte value in every position of
  /// every name gives what a byte-by-byte compare (ASCII letters folded,
  /// nothing else) gives; a CR where the name has `-` is not a match.
  func testEveryByteInEveryPositionIsComparedAsAByteCompareWould() {
    func folded(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5a ? byte | 0x20 : byte }
    for field in KnownField.allCases {
      let name = Array(field.name.description.utf8)
      for index in name.indices {
        for value in 0...255 {
          var bytes = name
          bytes[index] = UInt8(value)
          let expected: KnownField? = folded(UInt8(value)) == name[index] ? field : nil
          let found = bytes.withUnsafeBufferPointer { KnownField.recognize($0) }
          XCTAssertEqual(found, expected, "\(field.name) with byte \(value) at \(index)")
        }
      }
    }
    let carriageReturn = Array("content\rlength".utf8)
    XCTAssertNil(carriageReturn.withUnsafeBufferPointer { KnownField.recognize($0) })
  }

  /// Random lists, changed by every kind of change: the bit lookups agree
  /// with a compare of every name, and with the fields as listed.
  func testLookupsAgreeWithTheNamesAfterEveryChange() {
    var generator = SystemRandomNumberGenerator()
    let names = KnownField.allCases.map { $0.name.description.uppercased() } + ["Date", "X-Te", "Accept"]
    for _ in 0..<300 {
      var headers = HTTPHeaders()
      for _ in 0..<Int.random(in: 0...8, using: &generator) {
        headers.add(names.randomElement(using: &generator)!, "v\(Int.random(in: 0...9, using: &generator))")
      }
      switch Int.random(in: 0...3, using: &generator) {
      case 0: headers.remove(names.randomElement(using: &generator)!)
      case 1:
        let dropped = names.randomElement(using: &generator)!
        headers.filter { $0.name.lowercased() != dropped.lowercased() }
      case 2: headers.keepFields { known, _ in known != KnownField.connection.rawValue }
      default: headers.replace(names.randomElement(using: &generator)!, "again")
      }
      for field in KnownField.allCases {
        let listed = headers.fields.filter { $0.name.lowercased() == field.name.description }
        XCTAssertEqual(headers.contains(field), !listed.isEmpty, "\(field) in \(headers.fields)")
        var values: [String] = []
        headers.forEachValue(field) {
          values.append(String(decoding: $0, as: UTF8.self))
          return true
        }
        XCTAssertEqual(values, listed.map(\.value))
        XCTAssertEqual(
          headers.index(of: field, from: 0).map { headers[$0].name.lowercased() },
          listed.first.map { _ in field.name.description })
      }
    }
  }

  func testParsedFieldsAreRecognised() throws {
    let head = Array("GET / HTTP/1.1\r\nhOsT: a\r\nCONTENT-LENGTH: 0\r\nX-Other: 1\r\nConnection: close".utf8)
    let request = try HTTP1Grammar.requestHead(head, limits: HTTPLimits())
    XCTAssertTrue(request.headers.contains(.host))
    XCTAssertTrue(request.headers.contains(.contentLength))
    XCTAssertTrue(request.headers.containsToken(.connection, "close"))
    XCTAssertFalse(request.headers.contains(.transferEncoding))
  }

  /// `Connection` names other fields away: a known one by its bit, another
  /// only when the head has it; the protected ones never.
  func testConnectionTokensDropWhatTheyName() {
    var headers = HTTPHeaders([
      ("Connection", "close, X-Secret, Upgrade, Host"), ("X-Secret", "1"), ("Upgrade", "h2c"), ("Host", "a"),
      ("X-Kept", "2"),
    ])
    let kept = ForwardedHead.endToEnd(headers, dropping: ForwardedHead.droppedFromResponses)
    XCTAssertEqual(kept.fields.map(\.name), ["Host", "X-Kept"])
    headers.remove("X-Secret")
    let drop = ForwardedHead.dropped(headers, fixed: 0)
    XCTAssertNil(drop.named, "a name the head does not carry is not kept")
  }
}
