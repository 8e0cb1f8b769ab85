import PinHTTP2
import XCTest

/// Two real nghttp2 sessions, a client and a server, joined in memory:
/// `pump` moves bytes both ways until neither has anything to send. Each
/// side takes the DATA it receives at once (its window reopens), except the
/// server on `unreadByServer` streams. Shared by the codec's own tests and
/// by the proxy's tests of what an h2 client receives.
public final class HTTP2Pair {
  public var client: HTTP2Session
  public var server: HTTP2Session
  public var clientEvents: [HTTP2Event] = []
  public var serverEvents: [HTTP2Event] = []
  /// Streams whose DATA the server side leaves unread (no window updates).
  public var unreadByServer: Set<Int32> = []

  public init(client: HTTP2Session, server: HTTP2Session) {
    self.client = client
    self.server = server
  }

  public func pump(limit: Int = 10_000, file: StaticString = #filePath, line: UInt = #line) throws {
    for _ in 0..<limit {
      let toServer = try client.pendingOutput()
      clientEvents += client.takeEvents()
      if !toServer.isEmpty {
        let events = try server.receive(toServer)
        for case .data(let stream, let bytes) in events where !unreadByServer.contains(stream) {
          server.consume(stream: stream, bytes.count)
        }
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
}
