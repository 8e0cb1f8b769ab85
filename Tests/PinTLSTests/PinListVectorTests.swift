import Foundation
import PinTLS
import PinTrust
import XCTest

/// The interop vectors of the Wultra libraries (docs/TRUST.md,
/// dynamic pinning), checked with the real OpenSSL verifier. Their entries
/// expired long ago, so the clock is fixed before them.
final class PinListVectorTests: XCTestCase {
  static let googleKey =
    "BEG6g28LNWRcmdFzexSNTKPBYZnDtKrCyiExFKbktttfKAF7wG4Cx1Nycr5PwCoICG1dRseLyuDxUilAmppPxAo="
  static let githubKey =
    "BC3kV9OIDnMuVoCdDR9nEA/JidJLTTDLuSA2TSZsGgODSshfbZg31MS90WC/HdbU/A5WL5GmyDkE/iks6INv+XE="
  /// 2022-01-01: before both v1 entries expire.
  static let before = Date(timeIntervalSince1970: 1_640_995_200)

  static let v1List = """
    {"fingerprints":[
    {"name":"github.com","fingerprint":"kqN/vV4hpTqVxxbhFE9EL1grlND6/Gc+tnF6TrUaiKc=","expires":1710460799,"signature":"MEUCICB69UpMPOdtrsR6XcJqHEh2L2RO4oSJ3SZ7BYnTBJbGAiEAnZ7rEWdMVGwa59Wx5QbAorEFxXH89Iu0CnqWa96Eda0="},
    {"name":"github.com","fingerprint":"trmmrz6GbL4OajB+fdoXOzcrLTrD8GrxX5dxh3OEgAg=","expires":1652184000,"signature":"MEUCIQCs1y/nyrKh4+2DIuX/PufUYiaVUdt2FBZQg6rBeZ/r4QIgNlT4owBwJ1ThrDsE0SwGipTNI74vP1vNyLNEwuXY4lE="}
    ]}
    """

  func key(_ text: String) throws -> PinListPublicKey { try PinListPublicKey(base64: text) }

  func testRawSignatureVectors() throws {
    let google = try key(Self.googleKey)
    XCTAssertTrue(
      google.isValid(
        signature: Base64.decode(
          "MEQCIGDeccZP1CqyOCX9//L7duCKY8eYxYfKUAr0z4XWi7//AiAaOyhAtFqpcpULGzVescjmGgVrPIY77h9D45em9y9o8w==")!,
        over: Array("www.google.com&nu1DOBz31Y5FY6lRNkJV/HdnB6BDVCp7mX0nxkbub7Y=&1540280280000".utf8)))
    let github = try key(Self.githubKey)
    let signature = Base64.decode(
      "MEYCIQDoeBkao6W8wOqLGcicPzjQdzcA2y6ZXMdqQ+rgw7dSCQIhAN+CaYIizKRYQFc8OfQ84OEGiBjjfVqPVrnKFfUuVebr")!
    XCTAssertTrue(
      github.isValid(
        signature: signature,
        over: Array("github.com&MRFQDEpmASza4zPsP8ocnd5FyVREDn7kE3Fr/zZjwHQ=&1591185600000".utf8)))
    XCTAssertFalse(
      github.isValid(
        signature: signature,
        over: Array("github.com&MRFQDEpmASza4zPsP8ocnd5FyVREDn7kE3Fr/zZjwHQ=&1591185600".utf8)),
      "the same data in seconds instead of milliseconds must not verify")
    XCTAssertFalse(google.isValid(signature: signature, over: Array("github.com".utf8)))
  }

  func testV1ListEntriesVerifyAndFormTheList() throws {
    let document = try PinListDocument.parse(Array(Self.v1List.utf8), signedEntries: true)
    XCTAssertEqual(document.entries.count, 2)
    let outcome = try PinListUpdate.apply(
      document, verifier: try key(Self.githubKey), expectedCommonNames: ["github.com"], stored: .empty,
      at: Self.before
    ).get()
    XCTAssertEqual(outcome.list.entries.count, 2)
    XCTAssertEqual(outcome.list.source, .fetched)
    XCTAssertEqual(outcome.unexpectedNames, [])
    // Under another key both entries fail: the whole update is refused.
    let wrongKey = PinListUpdate.apply(
      document, verifier: try key(Self.googleKey), expectedCommonNames: [], stored: .empty, at: Self.before)
    XCTAssertEqual(try? wrongKey.get(), nil)
    if case .failure(let rejection) = wrongKey { XCTAssertEqual(rejection.reason, "signature") }
  }

  func testChallengeVector() throws {
    let body = Array(
      #"{"timestamp":1700000000,"fingerprints":[{"name":"github.com","fingerprint":"kqN/vV4hpTqVxxbhFE9EL1grlND6/Gc+tnF6TrUaiKc=","expires":1710460799}]}"#
        .utf8)
    let challenge = "AAECAwQFBgcICQoLDA0ODw=="
    let signature = Base64.decode(
      "MEQCICPPJ+G64PzTjn1KWxgY5gJwrt169uqAhFd6w0iv7Pw2AiBQQ+UC6qOG3+Nnu9EgT/Rw5Ig8pXPJU42idvxD90ZzHg==")!
    let github = try key(Self.githubKey)
    XCTAssertTrue(github.isValid(signature: signature, over: Array((challenge + "&").utf8) + body))
    XCTAssertFalse(
      github.isValid(signature: signature, over: Array("AAECAwQFBgcICQoLDA0ODx==&".utf8) + body),
      "another challenge must not verify")
    var tampered = body
    tampered[tampered.count - 3] = UInt8(ascii: "8")
    XCTAssertFalse(github.isValid(signature: signature, over: Array((challenge + "&").utf8) + tampered))
    let document = try PinListDocument.parse(body, signedEntries: false)
    XCTAssertEqual(document.timestamp, 1_700_000_000)
    let outcome = try PinListUpdate.apply(
      document, verifier: nil, expectedCommonNames: [], stored: .empty,
      at: Date(timeIntervalSince1970: 1_700_000_000)
    ).get()
    XCTAssertEqual(outcome.list.entries.first?.name, "github.com")
  }

  func testKeygenSignVerifyRoundTrip() throws {
    let signer = try PrivateKey.generateP256()
    let publicKey = try XCTUnwrap(signer.pinListPublicKey)
    XCTAssertTrue(publicKey.hasPrefix("B"))
    let verifier = try key(publicKey)
    let entry = PinListEntry(
      name: "api.bank.example", fingerprint: Digest256(bytes: [UInt8](repeating: 7, count: 32))!,
      expires: Date(timeIntervalSince1970: 1_900_000_000))
    let signature = try signer.signSHA256(entry.signedMessage)
    XCTAssertTrue(verifier.isValid(signature: signature, over: entry.signedMessage))
    XCTAssertEqual(
      String(decoding: entry.signedMessage, as: UTF8.self),
      "api.bank.example&BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=&1900000000")
    XCTAssertFalse(verifier.isValid(signature: signature, over: Array("other".utf8)))
  }

  func testBadPublicKeysAreRefused() {
    XCTAssertThrowsError(try PinListPublicKey(base64: "not base64"))
    // A 65-byte value that is not on the curve.
    let offCurve = Base64.encode([0x04] + [UInt8](repeating: 1, count: 64))
    XCTAssertThrowsError(try PinListPublicKey(base64: offCurve))
    XCTAssertThrowsError(
      try PinListPublicKey(base64: Base64.encode([0x04] + [UInt8](repeating: 1, count: 10))))
  }
}
