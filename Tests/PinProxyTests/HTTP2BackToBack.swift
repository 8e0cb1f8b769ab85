import PinHTTP
import PinHTTP2
import PinTestSupport
import XCTest

/// A real nghttp2 server session (the proxy's side of an h2 client
/// connection) joined in memory to a real client session (the client):
/// bytes are pumped both ways until neither has anything to send, so a
/// `DownstreamLink` can be checked by what an h2 client actually receives.
final class HTTP2BackToBack {
  let pair: HTTP2Pair
  var client: HTTP2Session { pair.client }
  var server: HTTP2Session { pair.server }
  var clientEvents: [HTTP2Event] { pair.clientEvents }
  var serverEvents: [HTTP2Event] { pair.serverEvents }

  init() throws {
    pair = HTTP2Pair(client: try HTTP2Session(role: .client), server: try HTTP2Session(role: .server))
  }

  func pump(file: StaticString = #filePath, line: UInt = #line) throws {
    try pair.pump(file: file, line: line)
  }

  /// Sends a request from the client and returns its stream, delivered to the server.
  func request(_ method: String = "GET", _ path: String = "/", _ extra: [HTTP2Header] = []) throws -> Int32 {
    let stream = try client.submitRequest(
      [
        .init(":method", method), .init(":scheme", "https"), .init(":authority", "origin.test"),
        .init(":path", path),
      ]
        + extra)
    try pump()
    return stream
  }

  /// The header blocks the client received on `stream`, in order.
  func blocks(_ stream: Int32) -> [[HTTP2Header]] {
    clientEvents.compactMap { if case .headers(stream, let block) = $0 { block } else { nil } }
  }

  func body(_ stream: Int32) -> [UInt8] {
    clientEvents.reduce(into: []) { bytes, event in
      if case .data(stream, let chunk) = event { bytes += chunk }
    }
  }

  func ended(_ stream: Int32) -> Bool { clientEvents.contains(.endStream(stream: stream)) }
}

extension [HTTP2Header] {
  /// The value of the first field called `name`.
  subscript(field name: String) -> String? {
    first { $0.name == [UInt8](name.utf8) }.map { String(decoding: $0.value, as: UTF8.self) }
  }
}
