import Foundation
import PinHTTP
import XCTest

@testable import PinProxy

/// The access line's two formats, its escaping, and the bounded writer
/// behind it (a real pipe stands for standard error).
final class AccessLogTests: XCTestCase {
  let line = AccessLine(
    client: "127.0.0.1:50000", method: "GET", host: "api.bank.example:443", path: "/a/b?c=d", status: 200,
    sent: 0, received: 18, upstreamMilliseconds: 3, upstreamConnection: "pooled", upstreamTLS: "resumed",
    upstreamProtocol: "h2", clientProtocol: "h2")
  /// 2026-11-24T02:35:16Z
  let time: time_t = 1_795_487_716

  /// Host, method, path and status lead, as on every event line
  /// (`LineLogHandler.order`); the rest follow alphabetically.
  func testTextLineHasTheEventLineShapeWithKeysInReadingOrder() {
    let text = String(decoding: line.formatted(.text, now: time), as: UTF8.self)
    XCTAssertEqual(
      text,
      "2026-11-24T02:35:16Z info request host=api.bank.example:443 method=GET path=\"/a/b?c=d\" status=200 "
        + "client=127.0.0.1:50000 client_protocol=h2 received=18 sent=0 upstream_connection=pooled upstream_ms=3 "
        + "upstream_protocol=h2 upstream_tls=resumed\n")
  }

  func testJSONKeysComeInTheOrderOfTheTextLine() {
    let text = String(decoding: line.formatted(.json, now: time), as: UTF8.self)
    let keys = text.split(separator: ",").compactMap { $0.split(separator: ":").first }.map {
      $0.trimmingCharacters(in: CharacterSet(charactersIn: "{\""))
    }
    XCTAssertEqual(
      Array(keys.prefix(7)), ["time", "level", "event", "host", "method", "path", "status"], text)
  }

  func testEventLinesLeadWithCodeHostRuleReasonAndEndWithTheChain() {
    let keys = ["status", "chain", "client", "reason", "incident", "rule", "host", "code", "path", "detail"]
    XCTAssertEqual(
      keys.sorted(by: LineLogHandler.order),
      ["code", "host", "rule", "reason", "path", "status", "client", "detail", "incident", "chain"])
  }

  func testJSONLineParsesWithEveryField() throws {
    let bytes = line.formatted(.json, now: time)
    XCTAssertEqual(bytes.last, UInt8(ascii: "\n"))
    let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(bytes)) as? [String: String])
    XCTAssertEqual(object["event"], "request")
    XCTAssertEqual(object["level"], "info")
    XCTAssertEqual(object["time"], "2026-11-24T02:35:16Z")
    XCTAssertEqual(object["path"], "/a/b?c=d")
    XCTAssertEqual(object["status"], "200")
    XCTAssertEqual(object["upstream_tls"], "resumed")
    XCTAssertEqual(object["upstream_protocol"], "h2")
    XCTAssertEqual(object["client_protocol"], "h2")
    XCTAssertEqual(object.count, 15)
  }

  func testClientChosenBytesAreEscapedInBothFormats() throws {
    var hostile = line
    hostile.path = "/x\r\n2026-01-01T00:00:00Z info request forged=1\u{1b}[2J\u{202e}\"\\"
    hostile.method = "G\tET"
    for format in [LineLogHandler.Format.text, .json] {
      let bytes = hostile.formatted(format, now: time)
      // One line, no control byte but its final newline.
      XCTAssertEqual(bytes.filter { $0 < 0x20 || $0 == 0x7f }, [0x0a], "\(format)")
      let text = String(decoding: bytes, as: UTF8.self)
      XCTAssertFalse(text.contains("\u{202e}"))
      XCTAssertTrue(text.contains("\\u{D}\\u{A}") || text.contains("\\\\u{D}\\\\u{A}"), text)
    }
    let object = try XCTUnwrap(
      JSONSerialization.jsonObject(with: Data(hostile.formatted(.json, now: time))) as? [String: String])
    XCTAssertEqual(object["method"], "G\\u{9}ET")
    XCTAssertEqual(object["path"], PrintableText.escaped(String(hostile.path)))
  }

  func testSinkWritesQueuedLinesInOrderBeforeAnEventLine() throws {
    let (reader, writer) = try pipe()
    defer { close(reader) }
    let sink = LogSink(fd: writer)
    for index in 0..<100 { XCTAssertTrue(sink.enqueue(Array("access \(index)\n".utf8))) }
    sink.writeNow(Array("event\n".utf8))
    close(writer)
    let lines = readAll(reader).split(separator: "\n").map(String.init)
    XCTAssertEqual(lines, (0..<100).map { "access \($0)" } + ["event"])
  }

  func testBackgroundWriterDrainsWithoutAFlush() throws {
    let (reader, writer) = try pipe()
    defer { close(reader) }
    let sink = LogSink(fd: writer)
    sink.enqueue(Array("one\n".utf8))
    sink.enqueue(Array("two\n".utf8))
    var received = ""
    let deadline = Date().addingTimeInterval(5)
    while received != "one\ntwo\n" && Date() < deadline {
      var buffer = [UInt8](repeating: 0, count: 64)
      var poller = pollfd(fd: reader, events: Int16(POLLIN), revents: 0)
      guard poll(&poller, 1, 100) > 0 else { continue }
      let count = read(reader, &buffer, buffer.count)
      if count > 0 { received += String(decoding: buffer[..<count], as: UTF8.self) }
    }
    XCTAssertEqual(received, "one\ntwo\n")
    close(writer)
  }

  func testAFullBufferDropsAndCountsInsteadOfGrowing() throws {
    let (reader, writer) = try pipe()
    // Nobody drains the buffer in time: 10 lines of 10 bytes fit in 100.
    let sink = LogSink(fd: writer, capacity: 100)
    defer {
      // Emptied before the fds go, so the writer thread has nothing left
      // to write into a descriptor number another test may reuse.
      sink.flush()
      close(reader)
      close(writer)
    }
    let accepted = (0..<25).filter { _ in sink.enqueue(Array("123456789\n".utf8)) }.count
    XCTAssertLessThanOrEqual(accepted, 25)
    XCTAssertEqual(sink.droppedLines, 25 - accepted)
    XCTAssertGreaterThan(sink.droppedLines, 0)
  }

  private func pipe() throws -> (Int32, Int32) {
    var fds: [Int32] = [0, 0]
    guard Glibc.pipe(&fds) == 0 else { throw POSIXError(.EMFILE) }
    return (fds[0], fds[1])
  }

  private func readAll(_ fd: Int32) -> String {
    var out: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = read(fd, &buffer, buffer.count)
      guard count > 0 else { break }
      out += buffer[..<count]
    }
    return String(decoding: out, as: UTF8.self)
  }
}
