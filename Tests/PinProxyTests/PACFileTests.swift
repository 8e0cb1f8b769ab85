import PinConfig
import PinHTTP
import XCTest

@testable import PinProxy

/// The PAC file's text from a configuration: what goes through the
/// listener, what goes directly, and that nothing of the configuration is
/// written unquoted. (Real engines read it in EndToEndTests/PACTests.)
final class PACFileTests: XCTestCase {
  func text(_ yaml: String, proxy: String = "127.0.0.1:3128") throws -> String {
    let configuration = try ConfigurationParser.parse(yaml, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 7)
    return PACFile.text(snapshot: snapshot, listener: configuration.listeners[0], proxy: proxy)
  }

  func testDenyByDefaultSendsOnlyTheGovernedHostsThroughTheListener() throws {
    let file = try text(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward, passthrough: [one.test, "*.two.test"]}
      defaults: {action: deny}
      domains:
        - {domain: pinned.test, includesSubdomains: true}
        - {domain: exact.test}
      """)
    XCTAssertTrue(file.contains(#"if (host == "exact.test") return "PROXY 127.0.0.1:3128";"#), file)
    XCTAssertTrue(file.contains(#"if (host == "one.test") return "PROXY 127.0.0.1:3128";"#), file)
    XCTAssertTrue(
      file.contains(
        #"if (host == "pinned.test" || dnsDomainIs(host, ".pinned.test")) return "PROXY 127.0.0.1:3128";"#),
      file)
    XCTAssertTrue(file.contains(#"dnsDomainIs(host, ".two.test")"#), file)
    XCTAssertTrue(file.hasSuffix("  return \"DIRECT\";\n}\n"), file)
    XCTAssertFalse(file.contains("dnsResolve") || file.contains("isInNet") || file.contains("RegExp"), file)
  }

  func testValidateByDefaultSendsEverythingThroughTheListener() throws {
    let file = try text(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward}
      domains:
        - {domain: pinned.test}
      """, proxy: "[::1]:3128")
    XCTAssertTrue(file.hasSuffix("  return \"PROXY [::1]:3128\";\n}\n"), file)
  }

  func testLiteralsQuoteEverything() {
    XCTAssertEqual(PACFile.literal(#"a"b\c"#), #""a\"b\\c""#)
    XCTAssertEqual(PACFile.literal("x\u{2028}y\n"), #""x\u2028y\u000a""#)
  }

  func testTheProxyAddressOfAListenerOnEveryAddressIsTheOneTheClientReached() throws {
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - {name: forward, address: "0.0.0.0:3128", mode: forward, allowedClients: ["10.0.0.0/8"]}
        - {name: six, address: "[::]:3129", mode: forward, allowedClients: ["10.0.0.0/8"]}
        - {name: fixed, address: "127.0.0.2:3130", mode: forward}
      """, file: "test.yaml")
    let (any, six, fixed) = (
      configuration.listeners[0], configuration.listeners[1], configuration.listeners[2]
    )
    XCTAssertEqual(PACFile.proxyAddress(listener: any, reached: [10, 1, 2, 3]), "10.1.2.3:3128")
    // A dual-stack listener's IPv4 client reached an IPv4 address.
    let mapped: [UInt8] = Array(repeating: 0, count: 10) + [0xff, 0xff, 192, 0, 2, 7]
    XCTAssertEqual(PACFile.proxyAddress(listener: six, reached: mapped), "192.0.2.7:3129")
    XCTAssertEqual(
      PACFile.proxyAddress(
        listener: six, reached: [0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1]),
      "[2001:db8::1]:3129")
    XCTAssertEqual(PACFile.proxyAddress(listener: any, reached: nil), "0.0.0.0:3128")
    // A listener on one address names it, whatever was reached.
    XCTAssertEqual(PACFile.proxyAddress(listener: fixed, reached: [10, 9, 9, 9]), "127.0.0.2:3130")
  }

  func testAListenerNameReachesTheFileOnlyAsAStringLiteral() throws {
    let configuration = try ConfigurationParser.parse(
      """
      listeners:
        - {name: forward, address: "127.0.0.1:3128", mode: forward}
      """, file: "test.yaml")
    var listener = configuration.listeners[0]
    listener.name = "x\nFindProxyForURL = function(u, h) { return \"PROXY evil:1\"; }\u{2028}y"
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    let text = PACFile.text(snapshot: snapshot, listener: listener, proxy: "127.0.0.1:3128")
    let lines = text.split(separator: "\n")
    XCTAssertTrue(lines[0].hasPrefix("// pinproxy "), text)
    XCTAssertFalse(lines.dropFirst().contains { $0.hasPrefix("FindProxyForURL") }, text)
    XCTAssertFalse(text.unicodeScalars.contains("\u{2028}"), text)
    XCTAssertEqual(text.components(separatedBy: "FindProxyForURL(url, host)").count, 2, text)
  }

  func testIfNoneMatchGets304AndHeadNoBody() throws {
    let file = "function FindProxyForURL(url, host) { return \"DIRECT\"; }\n"
    func head(_ method: String, _ fields: String = "") throws -> HTTPRequestHead {
      var parser = HTTP1Parser(role: .request, limits: HTTPLimits(), pausesBetweenMessages: true)
      let events = try parser.feed(Array("\(method) /proxy.pac HTTP/1.1\r\nHost: x\r\n\(fields)\r\n".utf8))
      for case .request(let head) in events { return head }
      throw HTTPParseError(.badRequest, "no head")
    }
    let full = String(decoding: PACFile.answer(file, head: try head("GET")), as: UTF8.self)
    XCTAssertTrue(full.hasPrefix("HTTP/1.1 200 OK\r\n") && full.hasSuffix(file), full)
    let etag = try XCTUnwrap(full.split(separator: "\r\n").first { $0.hasPrefix("ETag: ") }?.dropFirst(6))
    let cached = String(
      decoding: PACFile.answer(file, head: try head("GET", "If-None-Match: \(etag)\r\n")), as: UTF8.self)
    XCTAssertTrue(cached.hasPrefix("HTTP/1.1 304 Not Modified\r\n") && cached.hasSuffix("\r\n\r\n"), cached)
    let headOnly = String(decoding: PACFile.answer(file, head: try head("HEAD")), as: UTF8.self)
    XCTAssertTrue(
      headOnly.hasSuffix("\r\n\r\n") && headOnly.contains("Content-Length: \(file.utf8.count)"), headOnly)
  }
}
