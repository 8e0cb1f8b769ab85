import PinTLS
import PinTestSupport
import XCTest

/// The engine's one BIO (`TLSTransport`): ciphertext lent in place for one
/// call, the unread rest kept across calls in order, output taken whole.
/// Real OpenSSL engines on both sides, no sockets.
final class TLSTransportTests: XCTestCase {
  private var client: TLSEngine!
  private var server: TLSEngine!

  override func setUpWithError() throws {
    let clientContext = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    client = try clientContext.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
    server = try TLSServerContext(
      certificateChain: Fixtures.path("httpbin-chain.pem"), privateKey: Fixtures.path("httpbin.key"),
      minimumVersion: .tls12, maximumVersion: nil, ciphers: nil, clientCA: nil
    ).makeEngine()
    for _ in 0..<10 {
      let clientProgress = try client.handshake()
      server.receive(client.pendingOutput())
      let serverProgress = try server.handshake()
      client.receive(server.pendingOutput())
      if clientProgress == .complete && serverProgress == .complete && !server.hasPendingOutput { break }
    }
    XCTAssertTrue(client.isHandshakeComplete && server.isHandshakeComplete)
  }

  /// Three records from the server, as the client's socket would read them.
  private func serverRecords(_ messages: [String]) throws -> [UInt8] {
    for message in messages { try server.write(Array(message.utf8)) }
    return server.pendingOutput()
  }

  /// Everything the client can decrypt now, as text.
  private func readAll(_ engine: TLSEngine) throws -> String {
    var text = ""
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
    defer { buffer.deallocate() }
    while true {
      let (count, _) = try engine.read(into: buffer)
      if count == 0 { return text }
      text += String(decoding: UnsafeRawBufferPointer(rebasing: buffer[..<count]), as: UTF8.self)
    }
  }

  func testRecordsLentAndReadInPlaceThenTheLastOneSplitAcrossTwoLoans() throws {
    let ciphertext = try serverRecords(["one", "two", "three"])
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ciphertext.count, alignment: 1)
    defer { buffer.deallocate() }
    buffer.copyBytes(from: ciphertext)
    let split = ciphertext.count - 10
    var first = ""
    try client.lending(UnsafeRawBufferPointer(rebasing: buffer[..<split])) {
      first = try readAll(client)
    }
    XCTAssertEqual(first, "onetwo")
    // The loan is over: the socket's buffer is reused for the next read.
    buffer.copyBytes(from: [UInt8](repeating: 0xEE, count: split))
    var rest = ""
    try client.lending(UnsafeRawBufferPointer(rebasing: buffer[split...])) {
      rest = try readAll(client)
    }
    XCTAssertEqual(rest, "three")
    XCTAssertFalse(client.hasBufferedInput)
  }

  func testWhatALoanDidNotReadIsCopiedAndReadLaterInOrder() throws {
    let ciphertext = try serverRecords(["kept ", "then ", "read"])
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: ciphertext.count, alignment: 1)
    defer { buffer.deallocate() }
    buffer.copyBytes(from: ciphertext)
    // Lent while nothing reads (a handshake check waiting, say).
    client.lending(UnsafeRawBufferPointer(buffer)) {}
    XCTAssertTrue(client.hasBufferedInput)
    buffer.copyBytes(from: [UInt8](repeating: 0, count: buffer.count))
    // Bytes received later come after the kept ones.
    let more = try serverRecords([" more"])
    try more.withUnsafeBytes { lent in
      try client.lending(lent) { XCTAssertEqual(try readAll(client), "kept then read more") }
    }
    XCTAssertFalse(client.hasBufferedInput)
  }

  func testANestedLoanKeepsTheOuterLoansUnreadBytesFirst() throws {
    let ciphertext = try serverRecords(["outer ", "inner"])
    let half = ciphertext.count / 2
    var text = ""
    try ciphertext.withUnsafeBytes { bytes in
      try client.lending(UnsafeRawBufferPointer(rebasing: bytes[..<half])) {
        try client.lending(UnsafeRawBufferPointer(rebasing: bytes[half...])) {
          text = try readAll(client)
        }
      }
    }
    XCTAssertEqual(text, "outer inner")
  }

  func testReadSaysWantsInputWhenEveryReceivedByteWasRead() throws {
    let ciphertext = try serverRecords(["a response"])
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1024, alignment: 1)
    defer { buffer.deallocate() }
    let (count, progress) = try ciphertext.withUnsafeBytes { lent in
      try client.lending(lent) { try client.read(into: buffer) }
    }
    XCTAssertEqual(
      String(decoding: UnsafeRawBufferPointer(rebasing: buffer[..<count]), as: UTF8.self), "a response")
    XCTAssertEqual(progress, .wantsInput)
    // A buffer smaller than the record: full, and more is held.
    let small = UnsafeMutableRawBufferPointer.allocate(byteCount: 4, alignment: 1)
    defer { small.deallocate() }
    client.receive(try serverRecords(["0123456789"]))
    XCTAssertEqual(try client.read(into: small).1, .complete)
    XCTAssertTrue(client.hasBufferedInput)
    XCTAssertEqual(try readAll(client), "456789")
  }

  func testALargeWriteIsTakenInOnePieceAndDecryptsWhole() throws {
    let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    try server.write(payload)
    var pieces: [[UInt8]] = []
    server.takeOutput { pieces.append(Array($0)) }
    XCTAssertEqual(pieces.count, 1)
    XCTAssertGreaterThan(pieces[0].count, payload.count)
    XCTAssertFalse(server.hasPendingOutput)
    var taken = 0
    server.takeOutput { _ in taken += 1 }
    XCTAssertEqual(taken, 0, "nothing is handed out twice")
    client.receive(pieces[0])
    var received: [UInt8] = []
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
    defer { buffer.deallocate() }
    while true {
      let (count, _) = try client.read(into: buffer)
      if count == 0 { break }
      received += UnsafeRawBufferPointer(rebasing: buffer[..<count])
    }
    XCTAssertEqual(received, payload)
  }

  func testACorruptedRecordFailsTheReadNotTheProcess() throws {
    var ciphertext = try serverRecords(["tampered"])
    ciphertext[ciphertext.count - 3] ^= 0xFF
    client.receive(ciphertext)
    XCTAssertThrowsError(try readAll(client))
  }
}
