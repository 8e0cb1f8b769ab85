import PinHTTP
import PinHTTP2
import XCTest

/// A real nghttp2 server session (the proxy's side of an h2 client
/// connection) joined in memory to a real client session (the client):
/// bytes are pumped both ways until neither has anything to send, so a
/// `DownstreamLink` can be checked by what an h2 client actually receives.
final class HTTP2BackToBack {
  let client: HTTP2Session
  let server: HTTP2Session
  private(set) var clientEvents: [HTTP2Event] = []
  private(set) var serverEvents: [HTTP2Event] = []

  init() throws {
    client = try HTTP2Session(role: .client)
    server = try HTTP2Session(role: .server)
  }

  /// Moves bytes both ways until quiet; each side takes the DATA it gets at
  /// once (its window reopens).
  func pump(file: StaticString = #filePath, line: UInt = #line) throws {
    for _ in 0..<10_000 {
      let toServer = try client.pendingOutput()
      clientEvents += client.takeEvents()
      if !toServer.isEmpty {
        let events = try server.receive(toServer)
        for case .data(let stream, let bytes) in events { server.consume(stream: stream, bytes.count) }
        serverEvents += events
      }
      let toClient = try server.pendingOutput()
      serverEvents += server.takeEvents()
      if !toClient.isEmpty {
        let events = try client.receive(toClient)
        for case .data(let stream, let bytes) in events { client.consume(stream: stream, bytes.count) }
        clientEvents += events
      }
      if toServer.isEmpty && toClient.isEmpty { return }
    }
    XCTFail("the sessions never went quiet", file: file, line: line)
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
