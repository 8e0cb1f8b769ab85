import Foundation
import PinHTTP2
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// An h2 client on the test's end of a socket pair: a real nghttp2 client
/// session whose frames are written to the fd and whose peer's frames are
/// read from it, on the test thread. It takes the DATA it receives at once.
final class HTTP2TestClient {
  let fd: Int32
  let session: HTTP2Session
  private(set) var events: [HTTP2Event] = []
  private(set) var sawEOF = false

  init(fd: Int32) throws {
    self.fd = fd
    session = try HTTP2Session(role: .client)
  }

  deinit { Glibc.close(fd) }

  /// Opens a stream: `:scheme https` and `:authority origin.test`, as a
  /// client inside the CONNECT tunnel sends them. Written at once.
  @discardableResult
  func request(
    _ path: String = "/", method: String = "GET", _ extra: [HTTP2Header] = [], streaming: Bool = false
  ) throws -> Int32 {
    let stream = try session.submitRequest(
      [
        .init(":method", method), .init(":scheme", "https"), .init(":authority", "origin.test"),
        .init(":path", path),
      ]
        + extra, streaming: streaming)
    try flush()
    return stream
  }

  /// Writes everything the session has to send.
  func flush() throws {
    var bytes = try session.pendingOutput()[...]
    events += session.takeEvents()
    let deadline = Date().addingTimeInterval(10)
    while !bytes.isEmpty && Date() < deadline {
      let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if written > 0 {
        bytes = bytes.dropFirst(written)
      } else {
        // The proxy is not reading: take what it sent meanwhile, then retry.
        readAvailable(waitMilliseconds: 5)
      }
    }
  }

  /// Reads (and answers) until `done` holds, EOF, or `timeout` seconds; true when `done` held.
  @discardableResult
  func pump(timeout: Double = 10, until done: (HTTP2TestClient) -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !done(self) {
      if sawEOF || Date() > deadline { return false }
      readAvailable(waitMilliseconds: 20)
      try? flush()
    }
    return true
  }

  /// Reads what arrives within `waitMilliseconds` and feeds it to the session.
  func readAvailable(waitMilliseconds: Int32) {
    var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&poller, 1, waitMilliseconds) > 0 else { return }
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
    if count == 0 { sawEOF = true }
    guard count > 0 else { return }
    // After the proxy's GOAWAY nghttp2 may refuse more input; the events so far stand.
    guard let received = try? session.receive(Array(chunk[..<count])) else { return }
    for case .data(let stream, let bytes) in received { session.consume(stream: stream, bytes.count) }
    events += received
  }

  // MARK: What the client saw

  func blocks(_ stream: Int32) -> [[HTTP2Header]] {
    events.compactMap { if case .headers(stream, let block) = $0 { block } else { nil } }
  }

  func status(_ stream: Int32) -> String? { blocks(stream).first?[field: ":status"] }

  func body(_ stream: Int32) -> String {
    String(
      decoding: events.reduce(into: [UInt8]()) { bytes, event in
        if case .data(stream, let chunk) = event { bytes += chunk }
      }, as: UTF8.self)
  }

  func ended(_ stream: Int32) -> Bool { events.contains(.endStream(stream: stream)) }

  /// The error code of the client's first GOAWAY, once one came.
  var goAwayCode: UInt32? {
    for case .goAway(_, let code) in events { return code }
    return nil
  }
}
