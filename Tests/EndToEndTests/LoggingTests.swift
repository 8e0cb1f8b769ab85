import Foundation
import PinTestSupport
import XCTest

/// Log lines as an operator's collector sees them.
final class LoggingTests: ProxyTestCase {
  func testJSONLinesParseCarryTheAccessFieldsAndNeverTheSecrets() throws {
    let origin = try origin("httpbin", ["--client-ca", Fixtures.path("client-ca.pem")])
    let config = """
      logging: {format: json, level: info}
      listeners:
        - {name: forward, address: "127.0.0.1:{port:forward}", mode: forward}
      connectTo: ["httpbin.org:443:127.0.0.1:\(origin.port)", "pinned.httpbin.org:443:127.0.0.1:\(origin.port)"]
      anchorSets:
        test: {files: ["\(Fixtures.path("root-a.pem"))"]}
      domains:
        - domain: httpbin.org
          anchors: [test]
          clientIdentity: {pkcs12: "\(Fixtures.path("client.p12"))", passphraseFile: "\(Fixtures.path("client.pass"))"}
        - {domain: pinned.httpbin.org, anchors: [test], pinningMode: publicKey, pinnedPublicKeyHashes: ["\(Fixtures.certificate("adn.pem").spkiPin)"]}
      """
    proxy = try ProxyProcess(config: config, listeners: ["forward"], verbose: false)
    let port = proxy!.ports["forward"]!
    let served = try Curl.run([
      "-x", "http://127.0.0.1:\(port)", "-H", "Proxy-Authorization: Basic c2VjcmV0LXByb3h5LXBhc3M=",
      "http://httpbin.org/hello",
    ])
    XCTAssertEqual(served.status, 200, served.text)
    XCTAssertEqual(
      try Curl.run(["-x", "http://127.0.0.1:\(port)", "http://pinned.httpbin.org/hello"]).status, 502)
    XCTAssertTrue(proxy!.child.wait(for: "\"event\":\"refused\""), proxy!.log)

    let lines = proxy!.completeLogLines
    var events: [[String: String]] = []
    for line in lines {
      guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String] else {
        return XCTFail("not a JSON object: \(line)")
      }
      XCTAssertNotNil(object["time"], line)
      XCTAssertNotNil(object["level"], line)
      events.append(object)
    }
    let access = try XCTUnwrap(events.first { $0["event"] == "request" }, proxy!.log)
    XCTAssertEqual(access["method"], "GET")
    XCTAssertEqual(access["host"], "httpbin.org:443")
    XCTAssertEqual(access["path"], "/hello")
    XCTAssertEqual(access["status"], "200")
    XCTAssertEqual(access["received"], "18")
    XCTAssertNotNil(access["upstream_ms"])
    XCTAssertEqual(access["upstream_connection"], "new")
    XCTAssertTrue(access["client"]?.hasPrefix("127.0.0.1:") ?? false)
    let refused = try XCTUnwrap(events.first { $0["event"] == "refused" })
    XCTAssertEqual(refused["code"], "pin-mismatch")
    XCTAssertEqual(refused["rule"], "pinned.httpbin.org")
    XCTAssertTrue(events.contains { $0["event"] == "listening" })
    for secret in ["correct horse", "c2VjcmV0LXByb3h5LXBhc3M", "secret-proxy-pass"] {
      XCTAssertFalse(proxy!.log.contains(secret), "\(secret) leaked into the log")
    }
  }
}
