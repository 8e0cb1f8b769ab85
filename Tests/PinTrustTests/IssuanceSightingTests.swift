import Foundation
import XCTest

@testable import PinTrust

/// A CT sighting judged against a rule's pins: each kind of pin the trust
/// evaluation enforces must be met by the certificate or the chain the
/// monitor's file carries, a renewal on a pinned key is covered, and pins
/// past `pinsExpire` flag nothing.
final class IssuanceSightingTests: XCTestCase {
  let now = Date(timeIntervalSince1970: 1_800_000_000)
  func digest(_ byte: UInt8) -> Digest256 { Digest256(bytes: [UInt8](repeating: byte, count: 32))! }

  func sighting(key: UInt8, issuers: [UInt8]?, certificate: UInt8 = 50) -> IssuanceSighting {
    IssuanceSighting(
      names: ["www.bank.example"], leafKey: digest(key), certificate: digest(certificate),
      issuerKeys: issuers.map { $0.map(digest) },
      issuerCertificates: (issuers ?? []).map { digest($0 &+ 100) },
      issuer: "CN=CA", seen: now)
  }

  func keyPolicy(_ pins: [UInt8]) -> SecurityPolicy {
    var policy = SecurityPolicy()
    policy.pinningMode = .publicKey
    policy.pinnedPublicKeyHashes = pins.map(digest)
    return policy
  }

  func testPublicKeyPinsCoverTheLeafOrAKeyOfItsChain() {
    XCTAssertEqual(
      sighting(key: 1, issuers: [2]).judge(keyPolicy([1, 9]), dynamicList: nil, at: now), .covered)
    XCTAssertEqual(sighting(key: 3, issuers: [2]).judge(keyPolicy([2]), dynamicList: nil, at: now), .covered)
    guard
      case .unpinned(let reasons) = sighting(key: 3, issuers: [4]).judge(
        keyPolicy([1, 2]), dynamicList: nil, at: now)
    else { return XCTFail("a new key under a new issuer is not covered") }
    XCTAssertEqual(reasons, ["no pin covers the leaf key or a key of its chain"])
    guard
      case .unpinned(let unknown) = sighting(key: 3, issuers: nil).judge(
        keyPolicy([2]), dynamicList: nil, at: now)
    else { return XCTFail("no chain, no leaf pin: not covered") }
    XCTAssertTrue(unknown[0].contains("issuer is unknown"), unknown[0])
  }

  func testIdentitiesAreJudgedEachAgainstItsOwnCertificates() {
    var policy = SecurityPolicy()
    policy.pinnedLeafPublicKeyHashes = [digest(1)]
    policy.pinnedCAPublicKeyHashes = [digest(2)]
    XCTAssertEqual(sighting(key: 1, issuers: [2]).judge(policy, dynamicList: nil, at: now), .covered)
    // The CA's key on the leaf does not meet the leaf list, and the reverse.
    guard
      case .unpinned(let reasons) = sighting(key: 2, issuers: [1]).judge(policy, dynamicList: nil, at: now)
    else { return XCTFail("swapped keys are not covered") }
    XCTAssertEqual(reasons.count, 2, "\(reasons)")
    guard
      case .unpinned(let unknown) = sighting(key: 1, issuers: nil).judge(policy, dynamicList: nil, at: now)
    else { return XCTFail("CA pins without a chain cannot be met") }
    XCTAssertEqual(unknown.count, 1)
    XCTAssertTrue(unknown[0].hasPrefix("issuer unknown"), unknown[0])
  }

  func testDynamicListsAreMetByFingerprintAndExpiredOrAbsentPinsFlagNothing() {
    let policy = SecurityPolicy()
    XCTAssertEqual(sighting(key: 1, issuers: [2]).judge(policy, dynamicList: nil, at: now), .notPinned)
    XCTAssertEqual(sighting(key: 1, issuers: [2]).judge(policy, dynamicList: [digest(50)], at: now), .covered)
    XCTAssertEqual(
      sighting(key: 1, issuers: [2]).judge(policy, dynamicList: [digest(102)], at: now), .covered)
    guard case .unpinned = sighting(key: 1, issuers: [2]).judge(policy, dynamicList: [digest(7)], at: now)
    else {
      return XCTFail("a certificate the list does not name is not covered")
    }
    var expired = keyPolicy([9])
    expired.pinsExpire = now.addingTimeInterval(-1)
    XCTAssertEqual(sighting(key: 1, issuers: [2]).judge(expired, dynamicList: nil, at: now), .notPinned)
  }

  func testHexDigestsParseInEitherCaseAndRoundTrip() {
    let value = digest(0xAB)
    XCTAssertEqual(Digest256(hex: value.lowercaseHex), value)
    XCTAssertEqual(Digest256(hex: value.hex), value, "colon-separated upper case, as openssl prints")
    XCTAssertNil(Digest256(hex: String(value.lowercaseHex.dropLast())))
    XCTAssertNil(Digest256(hex: String(repeating: "g", count: 64)))
  }
}
