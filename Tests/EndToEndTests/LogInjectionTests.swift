import Foundation
import PinTestSupport
import XCTest

/// Client-controlled text reaches the logs (text and JSON) and the refusal
/// body escaped: ESC, BEL, OSC, CR, C1 controls, NEL, U+2028 and RLO each
/// show as a visible escape, never as the raw character.
final class LogInjectionTests: ProxyTestCase {
  static let hostile = [
    "\u{1B}[31m", "\u{07}", "\u{1B}]0;owned\u{07}", "\u{85}", "\u{9B}", "\u{2028}", "\u{202E}",
  ]

  func sendHostileContentLength(to port: Int) throws -> String {
    // Inside a field value only obs-text may carry them: send the UTF-8 bytes.
    let value =
      "1" + LogInjectionTests.hostile.filter { $0.unicodeScalars.allSatisfy { $0.value >= 0x80 } }.joined()
    let response = try RawHTTP.exchange(
      port: port,
      "POST http://httpbin.org/echo HTTP/1.1\r\nHost: httpbin.org\r\nContent-Length: \(value)\r\n\r\n")
    return response
  }

  func assertNoRawControls(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
    for scalar in text.unicodeScalars where scalar != "\n" && scalar != "\r" {
      let value = scalar.value
      let raw = value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x202E
      XCTAssertFalse(
        raw, "raw U+\(String(value, radix: 16)) in \(text.debugDescription)", file: file, line: line)
    }
  }

  func testTheRefusalBodyAndTextLogAreEscaped() throws {
    let port = try startProxy(
      map: ["httpbin.org": try origin()], domains: "  - {domain: httpbin.org, anchors: [test]}")
    let response = try sendHostileContentLength(to: port)
    XCTAssertTrue(response.hasPrefix("HTTP/1.1 400 "), response)
    assertNoRawControls(response)
    XCTAssertTrue(
      response.contains("\\u{2028}") && response.contains("\\u{202E}") && response.contains("\\u{85}"),
      response)
    XCTAssertTrue(proxy!.child.wait(for: "invalid Content-Length"), proxy!.log)
    assertNoRawControls(proxy!.log)
    XCTAssertTrue(proxy!.log.contains("\\u{2028}"), proxy!.log)
  }

  func testTheJSONLogIsEscaped() throws {
    let origin = try origin()
    let config = httpbinConfig(origin, top: "logging: {format: json}")
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    _ = try sendHostileContentLength(to: proxy!.ports["forward"]!)
    XCTAssertTrue(proxy!.child.wait(for: "invalid Content-Length"), proxy!.log)
    for line in proxy!.completeLogLines where line.contains("Content-Length") {
      let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
      let reason = try XCTUnwrap(object?["reason"] as? String)
      assertNoRawControls(reason)
      XCTAssertTrue(reason.contains("\\u{2028}"), reason)
    }
  }

  /// A client's SNI is logged when it names another host than its CONNECT:
  /// a hand-built ClientHello carries ESC and BEL in the server name.
  func testAHostileSNIIsEscapedInTheLog() throws {
    let origin = try origin()
    let config = httpbinConfig(origin)
    proxy = try ProxyProcess(config: config, listeners: ["forward"])
    // ESC and BEL in the server name (12 bytes, as "evil.example").
    try HandEditedClientHello.send(to: proxy!.ports["forward"]!, serverName: #"a\x1b]0;x\x07b.com"#)
    XCTAssertTrue(proxy!.child.wait(for: "(SNI)"), proxy!.log)
    assertNoRawControls(proxy!.log)
    XCTAssertTrue(proxy!.log.contains("a\\u{1B}]0;x\\u{7}b.com"), proxy!.log)
  }
}
