import Foundation
import PinHTTP
import PinTrust
import XCTest

@testable import PinProxy

/// The refusal page: who gets it, what it says, and that nothing a client
/// or an origin chose reaches it unescaped.
final class RefusalPageTests: XCTestCase {
  func head(accept: String?, _ extra: [String] = []) throws -> HTTPRequestHead {
    var parser = HTTP1Parser(role: .request, limits: HTTPLimits(), pausesBetweenMessages: true)
    let fields = ((accept.map { ["Accept: \($0)"] } ?? []) + extra).map { $0 + "\r\n" }.joined()
    let events = try parser.feed(Array("GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\(fields)\r\n".utf8))
    for case .request(let head) in events { return head }
    throw HTTPParseError(.badRequest, "no head")
  }

  func testOnlyBrowsersAndWebViewsGetThePage() throws {
    let browser = "User-Agent: Mozilla/5.0 (Linux; Android 14; wv) AppleWebKit/537.36"
    XCTAssertTrue(
      RefusalPage.wanted(by: try head(accept: "text/html,application/xhtml+xml,*/*;q=0.8", [browser])))
    XCTAssertTrue(RefusalPage.wanted(by: try head(accept: "TEXT/HTML; q=0.9", [browser])))
    XCTAssertTrue(RefusalPage.wanted(by: try head(accept: "*/*", ["Sec-Fetch-Mode: navigate"])))
    XCTAssertTrue(RefusalPage.wanted(by: try head(accept: nil, ["Upgrade-Insecure-Requests: 1"])))
    // Java's HttpURLConnection: HTML first, but a program.
    let java = "text/html, image/gif, image/jpeg, *; q=.2, */*; q=.2"
    XCTAssertFalse(RefusalPage.wanted(by: try head(accept: java, ["User-Agent: Java/17.0.15"])))
    XCTAssertFalse(RefusalPage.wanted(by: try head(accept: "text/html,*/*;q=0.8")))
    XCTAssertFalse(RefusalPage.wanted(by: try head(accept: "application/json, text/html", [browser])))
    XCTAssertFalse(
      RefusalPage.wanted(
        by: try head(accept: "*/*", [browser, "Sec-Fetch-Mode: cors", "Upgrade-Insecure-Requests: 0"])))
    XCTAssertFalse(RefusalPage.wanted(by: try head(accept: "*/*")))
    XCTAssertFalse(RefusalPage.wanted(by: try head(accept: nil)))
    XCTAssertFalse(RefusalPage.wanted(by: nil))
  }

  func testPageNamesTheFailureInPlainWordsAndEscapesEveryValue() {
    var failure = ProxyFailure(
      status: 502, code: .pinMismatch, reason: "no key <b>matches</b> \u{1b}[31m & \"quoted\"",
      chain: "[CN=<script>alert(1)</script> sha256/AAAA= sha256=BBBB] [CN=root sha256/CCCC= sha256=DDDD]")
    failure.detail = "secret OS detail"
    let page = RefusalPage(
      failure: failure, host: "a.test:443", rule: "*.test'><img src=x>",
      time: Date(timeIntervalSince1970: 1_795_487_716))
    let html = String(decoding: page.html(), as: UTF8.self)
    XCTAssertTrue(html.contains("<h1>This site&#39;s certificate does not match what it is pinned to</h1>"))
    XCTAssertTrue(html.contains("2026-11-24T02:35:16Z"))
    XCTAssertTrue(
      html.contains("no key &lt;b&gt;matches&lt;/b&gt; \\u{1B}[31m &amp; &quot;quoted&quot;"), html)
    XCTAssertTrue(html.contains("CN=&lt;script&gt;alert(1)&lt;/script&gt;"))
    XCTAssertTrue(html.contains("*.test&#39;&gt;&lt;img src=x&gt;"))
    XCTAssertFalse(html.contains("<script"))
    XCTAssertFalse(html.contains("<img"))
    XCTAssertFalse(html.contains("secret OS detail"), "the OS detail stays in the log")
    XCTAssertTrue(html.contains("<details>"))
    // One certificate a line, with a real line break between them.
    XCTAssertTrue(html.contains("sha256=BBBB]\n[CN=root"), html)
    XCTAssertFalse(html.contains("\\u{A}"), "no escaped newline in the chain")
    XCTAssertTrue(html.contains("pinproxy pin --config FILE a.test:443"))
    XCTAssertTrue(html.contains("pinproxy evaluate --host a.test"))
  }

  func testResponseKeepsStatusAndHeaderForBothBodies() {
    let failure = ProxyFailure(status: 403, code: .deniedByPolicy, reason: "no rule")
    let plain = String(decoding: failure.response(), as: UTF8.self)
    let page = RefusalPage(failure: failure, host: "b.test", rule: "-", time: Date())
    let html = String(decoding: failure.response(page: page), as: UTF8.self)
    for text in [plain, html] {
      // The code in the reason phrase: clients that print only the status line show it.
      XCTAssertTrue(text.hasPrefix("HTTP/1.1 403 Forbidden (pinproxy: denied-by-policy)\r\n"), text)
      XCTAssertTrue(text.contains("Pinproxy-Error: denied-by-policy\r\n"))
    }
    XCTAssertTrue(plain.contains("Content-Type: text/plain; charset=utf-8\r\n"))
    XCTAssertTrue(html.contains("Content-Type: text/html; charset=utf-8\r\n"))
    XCTAssertTrue(html.contains("This site is not allowed through this proxy"))
    XCTAssertTrue(html.contains("Add a domain rule for b.test"))
    XCTAssertTrue(html.contains("<dt>Rule</dt><dd><code>none</code></dd>"), "no rule, in words")
  }
}
