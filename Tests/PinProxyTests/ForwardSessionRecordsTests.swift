import Foundation
import PinConfig
import PinEventLoop
import XCTest

@testable import PinProxy

/// A loop keeps ended forward sessions whole and serves its next
/// connections with them: only one nothing else holds, never one that took
/// a path the uniqueness check cannot see, and always under the policy in
/// force when the new connection came. One scenario per test.
final class ForwardSessionRecordsTests: XCTestCase {
  override class func setUp() { SignalHandling.ignoreSIGPIPE() }

  final class Record {
    let name: String
    init(_ name: String) { self.name = name }
  }

  func testOnlyARecordNothingElseHoldsIsHandedOutAndTheListIsBounded() {
    var records = RetiredRecords<Record>(capacity: 2)
    var held: Record? = Record("held")
    XCTAssertNil(records.retire(held!))
    XCTAssertNil(records.takeUnheld(), "a record the test still holds waits on the list")
    XCTAssertNil(records.retire(Record("free")))
    XCTAssertEqual(records.takeUnheld()?.name, "free")
    XCTAssertEqual(records.count, 1)
    held = nil
    XCTAssertEqual(records.takeUnheld()?.name, "held", "once let go elsewhere, it is handed out")
    XCTAssertNil(records.takeUnheld())
    for name in ["a", "b"] { XCTAssertNil(records.retire(Record(name))) }
    XCTAssertEqual(records.retire(Record("c"))?.name, "a", "past the bound the oldest is let go")
    XCTAssertEqual(records.count, 2)
    XCTAssertNil(records.takeUnheld(where: { $0.name == "a" }), "let go of")
    XCTAssertEqual(
      records.takeUnheld(where: { $0.name == "b" })?.name, "b", "one that fits, not the most recent")
    XCTAssertEqual(records.takeUnheld()?.name, "c")
  }

  func request(_ origin: ScriptedOrigin, _ path: String) -> String {
    "GET http://127.0.0.1:\(origin.port)\(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
  }

  func shelf(_ proxy: InProcessProxy) -> (reused: Int, retired: Int) {
    let loop = proxy.group.next()
    return loop.runAndWait {
      let shelf = ForwardStorageShelf.of(loop)!
      return (shelf.reusedSessions, shelf.retiredSessions.count)
    }
  }

  /// One connection served `request` (its response ending in `answer`)
  /// and closed by the client; its session is then on the shelf.
  func serveAndEnd(_ proxy: InProcessProxy, _ request: String, answer: String) throws {
    let first = try proxy.connectClient()
    first.send(request)
    XCTAssertTrue(first.read { $0.text.hasSuffix(answer) }, first.text)
    _ = Glibc.shutdown(first.fd, Int32(SHUT_RDWR))
    XCTAssertTrue(waitUntil { self.shelf(proxy).retired == 1 }, "the ended session was kept")
  }

  func testTheNextConnectionIsServedByTheEndedSessionAndGetsItsOwnAnswers() throws {
    let origin = try ScriptedOrigin { connection, _, requestIndex in
      let body = "answer \(requestIndex)"
      connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8))
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    try serveAndEnd(proxy, request(origin, "/1"), answer: "answer 0")
    // Another listener's connection gets a session of its own.
    let other = try proxy.connectClient(bound: BoundListener(proxy.listener))
    other.send(request(origin, "/other"))
    XCTAssertTrue(other.read { $0.text.hasSuffix("answer 1") }, other.text)
    XCTAssertEqual(shelf(proxy).reused, 0, "a session serves only its own listener's connections")
    let second = try proxy.connectClient()
    XCTAssertEqual(shelf(proxy).reused, 1)
    second.send(request(origin, "/2"))
    XCTAssertTrue(second.read { $0.text.hasSuffix("answer 2") }, second.text)
    // Its head deadline and keep-alive are its own: a second request on it is served too.
    second.send(request(origin, "/3"))
    XCTAssertTrue(second.read { $0.text.hasSuffix("answer 3") }, second.text)
    XCTAssertEqual(shelf(proxy).retired, 0)
    // Its admission ticket, issued again, counts it in and out like a new one.
    XCTAssertEqual(proxy.context.admission.open.load(ordering: .relaxed), 2, "other and second")
    _ = Glibc.shutdown(second.fd, Int32(SHUT_RDWR))
    XCTAssertTrue(waitUntil { proxy.context.admission.open.load(ordering: .relaxed) == 1 })
    XCTAssertTrue(waitUntil { self.shelf(proxy).retired == 1 }, "and it is kept again")
  }

  /// The upstream links a session's machine names by handle are let go of
  /// as each exchange ends, whichever way: released to the pool, or closed
  /// under the exchange by the origin (a pooled connection the origin
  /// dropped as the next request went out, retried on a new one). A link
  /// not let go would stay held for the connection's life, one per request.
  func testALiveSessionHoldsNoUpstreamLinkBetweenRequests() throws {
    let origin = try ScriptedOrigin { connection, connectionIndex, requestIndex in
      if connectionIndex == 0 && requestIndex == 1 { return connection.close() }
      let body = "c\(connectionIndex) r\(requestIndex)"
      connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8))
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    let client = try proxy.connectClient()
    let loop = proxy.group.next()
    func heldLinks() -> [Int] {
      loop.runAndWait {
        proxy.context.loopState(for: loop).registry.sessions.compactMap { session in
          (session as? ForwardSession).map { $0.upstreams.isEmpty ? 0 : 1 }
        }
      }
    }
    client.send(request(origin, "/1"))
    XCTAssertTrue(client.read { $0.text.hasSuffix("c0 r0") }, client.text)
    XCTAssertEqual(heldLinks(), [0], "released to the pool: not held")
    client.send(request(origin, "/2"))
    XCTAssertTrue(client.read { $0.text.hasSuffix("c1 r0") }, client.text)
    XCTAssertEqual(origin.connectionCount, 2, "the dropped pooled connection was retried on a new one")
    XCTAssertEqual(heldLinks(), [0], "the link the origin closed is not held either")
  }

  func testAReusedSessionDecidesUnderTheSnapshotInstalledSinceTheLastConnection() throws {
    let origin = try ScriptedOrigin { connection, _, _ in
      connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    try serveAndEnd(proxy, request(origin, "/"), answer: "\r\n\r\nok")
    // The reload drops the rule that allowed plain HTTP to this origin.
    let text = """
      listeners:
        - name: forward
          address: 127.0.0.1:3128
          mode: forward
          allowedConnectPorts: [\(origin.port)]
      logging:
        access: false
      """
    let configuration = try ConfigurationParser.parse(text, file: "reloaded.yaml")
    proxy.context.install(try RuntimeSnapshot.compile(configuration, generation: 2))
    let second = try proxy.connectClient()
    second.send(request(origin, "/"))
    XCTAssertTrue(second.read { $0.text.contains("\r\n\r\n") }, second.text)
    XCTAssertEqual(shelf(proxy).reused, 1, "the same session record")
    XCTAssertFalse(second.text.hasPrefix("HTTP/1.1 200"), "refused under the new snapshot: \(second.text)")
    XCTAssertEqual(origin.requestCount, 1, "the origin saw only the first request")
  }

  func testARefusedConnectionsSessionIsNotKept() throws {
    let origin = try ScriptedOrigin { connection, _, _ in
      connection.write(Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))
    }
    defer { origin.close() }
    let proxy = try InProcessProxy(originPort: origin.port)
    var refused: TestClient? = try proxy.connectClient()
    // A port the listener does not allow: refused, and closed lingeringly.
    refused!.send("GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    XCTAssertTrue(refused!.read { $0.text.contains("\r\n\r\n") }, refused!.text)
    XCTAssertFalse(refused!.text.hasPrefix("HTTP/1.1 200"), refused!.text)
    refused = nil
    let served = try proxy.connectClient()
    served.send(request(origin, "/"))
    XCTAssertTrue(served.read { $0.text.hasSuffix("\r\n\r\nok") }, served.text)
    XCTAssertEqual(shelf(proxy).reused, 0, "a session that refused ends as before")
  }
}
