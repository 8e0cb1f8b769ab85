import PinTLS
import PinTestSupport
import PinTrust
import XCTest

/// Client and server engines talking through memory, no sockets: the
/// handshake, data, and the failure codes a real upstream would cause.
final class TLSEngineTests: XCTestCase {
  func server(
    _ name: String = "httpbin", maximum: TLSVersion? = nil, minimum: TLSVersion = .tls12,
    ciphers: String? = nil,
    clientCA: String? = nil
  ) throws -> TLSServerContext {
    try TLSServerContext(
      certificateChain: Fixtures.path("\(name)-chain.pem"), privateKey: Fixtures.path("\(name).key"),
      minimumVersion: minimum, maximumVersion: maximum, ciphers: ciphers, clientCA: clientCA)
  }

  /// Moves bytes both ways until neither side has anything left to say.
  func pump(_ client: TLSEngine, _ server: TLSEngine) throws -> (TLSEngine.Progress, TLSEngine.Progress) {
    var clientState = TLSEngine.Progress.wantsInput
    var serverState = TLSEngine.Progress.wantsInput
    for _ in 0..<20 {
      clientState = try client.handshake()
      server.receive(client.pendingOutput())
      serverState = try server.handshake()
      client.receive(server.pendingOutput())
      if clientState == .complete && serverState == .complete && !client.hasPendingOutput
        && !server.hasPendingOutput
      {
        break
      }
    }
    return (clientState, serverState)
  }

  func handshakeFailure(client: TLSClientContext, server: TLSServerContext) throws -> (
    TLSEngine.Failure, TLSEngine
  )? {
    let clientEngine = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let serverEngine = try server.makeEngine()
    do {
      _ = try pump(clientEngine, serverEngine)
    } catch let failure as TLSEngine.Failure {
      // The server may fail first; let the client read the alert it sent.
      clientEngine.receive(serverEngine.pendingOutput())
      do {
        _ = try clientEngine.handshake()
      } catch let clientFailure {
        return (clientFailure, clientEngine)
      }
      return (failure, clientEngine)
    }
    return nil
  }

  func testHandshakeThenDataBothWaysThenCloseNotify() throws {
    let client = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    let clientEngine = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let serverEngine = try server().makeEngine()
    let (clientState, serverState) = try pump(clientEngine, serverEngine)
    XCTAssertEqual(clientState, .complete)
    XCTAssertEqual(serverState, .complete)
    XCTAssertEqual(
      clientEngine.peerChain().map { $0.value().commonName }, ["httpbin.org", "Pinproxy Test Intermediate A"])
    XCTAssertEqual(clientEngine.negotiatedProtocol, "TLSv1.3")

    try clientEngine.write(Array("GET / HTTP/1.1\r\n\r\n".utf8))
    serverEngine.receive(clientEngine.pendingOutput())
    let (request, _) = try serverEngine.read()
    XCTAssertEqual(String(decoding: request, as: UTF8.self), "GET / HTTP/1.1\r\n\r\n")
    try serverEngine.write([UInt8](repeating: 0x41, count: 100_000))
    clientEngine.receive(serverEngine.pendingOutput())
    var received: [UInt8] = []
    while received.count < 100_000 {
      let (chunk, progress) = try clientEngine.read()
      received += chunk
      if progress != .complete && chunk.isEmpty { break }
    }
    XCTAssertEqual(received.count, 100_000)
    serverEngine.close()
    clientEngine.receive(serverEngine.pendingOutput())
    XCTAssertEqual(try clientEngine.read().1, .closed)
  }

  func testTLS10OnlyServerFailsAMinimumOfTLS12WithTLSVersion() throws {
    let client = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    let legacy = try server(maximum: .tls10, minimum: .tls10)
    let (failure, engine) = try XCTUnwrap(handshakeFailure(client: client, server: legacy))
    XCTAssertEqual(
      HandshakeDiagnosis.code(for: failure, engine: engine, requiresForwardSecrecy: true), .tlsVersion,
      failure.description)
  }

  func testTLS10IsAcceptedWhenTheRuleAllowsIt() throws {
    let client = try TLSClientContext(minimumVersion: .tls10, requiresForwardSecrecy: false)
    let clientEngine = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let serverEngine = try server(maximum: .tls10, minimum: .tls10).makeEngine()
    XCTAssertEqual(try pump(clientEngine, serverEngine).0, .complete)
    XCTAssertEqual(clientEngine.negotiatedProtocol, "TLSv1")
  }

  func testRSAKeyExchangeOnlyServerFailsForwardSecrecyWithWeakCipher() throws {
    let client = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    let rsaOnly = try server(maximum: .tls12, ciphers: "AES128-GCM-SHA256:AES256-GCM-SHA384:AES128-SHA")
    let (failure, engine) = try XCTUnwrap(handshakeFailure(client: client, server: rsaOnly))
    XCTAssertEqual(
      HandshakeDiagnosis.code(for: failure, engine: engine, requiresForwardSecrecy: true), .weakCipher,
      failure.description)
    // Without the requirement the same server is fine.
    let lenient = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: false)
    let clientEngine = try lenient.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    XCTAssertEqual(try pump(clientEngine, try rsaOnly.makeEngine()).0, .complete)
    XCTAssertEqual(clientEngine.negotiatedCipher, "AES256-GCM-SHA384")
  }

  func testSessionIsResumedOnTheNextConnection() throws {
    let client = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    let serverContext = try server(maximum: .tls12)
    let first = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let firstServer = try serverContext.makeEngine()
    _ = try pump(first, firstServer)
    XCTAssertFalse(first.sessionReused)
    let session = try XCTUnwrap(TLSSession(from: first))
    let second = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: session)
    _ = try pump(second, try serverContext.makeEngine())
    XCTAssertTrue(second.sessionReused)
  }

  func testMutualTLSWithAndWithoutAClientIdentity() throws {
    let serverContext = try server(clientCA: Fixtures.path("client-ca.pem"))
    let anonymous = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    let anonymousEngine = try anonymous.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let anonymousServer = try serverContext.makeEngine()
    XCTAssertThrowsError(
      try {
        _ = try self.pump(anonymousEngine, anonymousServer)
        // TLS 1.3: the client learns of the refusal on its first read.
        anonymousEngine.receive(anonymousServer.pendingOutput())
        _ = try anonymousEngine.read()
      }())
    let identity = try ClientIdentity(
      pkcs12Path: Fixtures.path("client.p12"), passphraseFile: Fixtures.path("client.pass"))
    XCTAssertEqual(identity.certificate.value().commonName, "pinproxy test client")
    let authenticated = try TLSClientContext(
      minimumVersion: .tls12, requiresForwardSecrecy: true, identity: identity)
    let engine = try authenticated.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let serverEngine = try serverContext.makeEngine()
    XCTAssertEqual(try pump(engine, serverEngine).0, .complete)
    try engine.write(Array("ping".utf8))
    serverEngine.receive(engine.pendingOutput())
    XCTAssertEqual(try serverEngine.read().0, Array("ping".utf8))
  }

  func testWrongPassphraseIsAClearErrorWithoutTheSecret() throws {
    let temporary = try TemporaryFile("not the passphrase\n", suffix: ".pass")
    defer { temporary.remove() }
    let file = temporary.path
    XCTAssertThrowsError(try ClientIdentity(pkcs12Path: Fixtures.path("client.p12"), passphraseFile: file)) {
      error in
      XCTAssertTrue("\(error)".contains("cannot decrypt"), "\(error)")
      XCTAssertFalse(
        "\(error)".contains("not the passphrase"), "the passphrase must never appear in an error")
    }
  }
}

extension TLSEngineTests {
  func testTLS13SessionIsResumableOnceTheTicketHasBeenRead() throws {
    let client = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    let serverContext = try server()
    var first: TLSEngine? = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    let firstServer = try serverContext.makeEngine()
    _ = try pump(first!, firstServer)
    XCTAssertEqual(first!.negotiatedProtocol, "TLSv1.3")
    // Tickets travel after the handshake: the client sees them when it next reads.
    try firstServer.write(Array("response".utf8))
    first!.receive(firstServer.pendingOutput())
    XCTAssertEqual(try first!.read().0, Array("response".utf8))
    let session = try XCTUnwrap(TLSSession(from: first!))
    // Freed after close_notify, as the proxy does: the session must stay resumable.
    first!.close()
    first = nil
    let second = try client.makeEngine(serverName: .dns("httpbin.org"), resuming: session)
    _ = try pump(second, try serverContext.makeEngine())
    XCTAssertTrue(second.sessionReused)
  }
}
