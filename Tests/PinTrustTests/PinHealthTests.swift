import Foundation
import XCTest

@testable import PinTrust

/// Pin health from a configuration and from an accepted chain: the matched
/// pin, days to expiry, backup pins and the warnings an operator acts on.
final class PinHealthTests: XCTestCase {
  let now = Date(timeIntervalSince1970: 1_800_000_000)

  func certificate(_ name: String, key byte: UInt8, expiresInDays days: Double) -> Certificate {
    let stub = Certificate.stub(subject: "CN=\(name)", commonName: name)
    return Certificate(
      der: [byte], fingerprint: Digest256(bytes: [UInt8](repeating: byte &+ 100, count: 32))!,
      spkiFingerprint: Digest256(bytes: [UInt8](repeating: byte, count: 32))!, subject: stub.subject,
      issuer: stub.issuer, commonName: name, dnsNames: [], ipAddresses: [], notBefore: .distantPast,
      notAfter: now.addingTimeInterval(days * 86_400), publicKey: stub.publicKey,
      signatureAlgorithm: stub.signatureAlgorithm, profile: stub.profile)
  }

  func policy(pins: [Digest256]) -> SecurityPolicy {
    var policy = SecurityPolicy()
    policy.pinningMode = .publicKey
    policy.pinnedPublicKeyHashes = pins
    return policy
  }

  func testAChainExpiringIn10DaysWithoutABackupPinIsFlagged() {
    let leaf = certificate("leaf", key: 1, expiresInDays: 10)
    let root = certificate("root", key: 2, expiresInDays: 3000)
    let health = PinHealth.assess(
      policy(pins: [leaf.spkiFingerprint]), chain: [leaf, root], hasDynamicList: false, at: now)
    XCTAssertEqual(health.matched?.pin, leaf.spkiPin)
    XCTAssertEqual(health.matched?.depth, 0)
    XCTAssertEqual(health.daysToExpiry, 10)
    XCTAssertFalse(health.hasBackup)
    XCTAssertTrue(health.isSinglePin)
    XCTAssertEqual(health.warnings.count, 2, "\(health.warnings)")
    XCTAssertTrue(
      health.warnings[1].contains("CN=leaf expires in 10 days and no backup pin"), health.warnings[1])
  }

  func testABackupPinTheChainDoesNotUseClearsTheWarning() {
    let leaf = certificate("leaf", key: 1, expiresInDays: 10)
    let backup = certificate("next", key: 9, expiresInDays: 400)
    let health = PinHealth.assess(
      policy(pins: [leaf.spkiFingerprint, backup.spkiFingerprint]), chain: [leaf], hasDynamicList: false,
      at: now)
    XCTAssertTrue(health.hasBackup)
    XCTAssertEqual(health.backupPins, [backup.spkiPin])
    XCTAssertEqual(health.warnings, [])
  }

  /// Two pins that the chain both uses (leaf and its CA) leave nothing to
  /// rotate to: no backup.
  func testPinsTheChainAlreadyUsesAreNoBackup() {
    let leaf = certificate("leaf", key: 1, expiresInDays: 5)
    let ca = certificate("ca", key: 2, expiresInDays: 5)
    let health = PinHealth.assess(
      policy(pins: [leaf.spkiFingerprint, ca.spkiFingerprint]), chain: [leaf, ca], hasDynamicList: false,
      at: now)
    XCTAssertFalse(health.hasBackup)
    XCTAssertFalse(health.isSinglePin)
    XCTAssertEqual(health.warnings.count, 1)
  }

  /// Several pins, all on the chain in service (leaf and CA, far from
  /// expiry): nothing held back for the next key, said as such.
  func testPinsAllInServiceAreNoOfflineBackup() {
    let leaf = certificate("leaf", key: 1, expiresInDays: 300)
    let ca = certificate("ca", key: 2, expiresInDays: 3000)
    let health = PinHealth.assess(
      policy(pins: [leaf.spkiFingerprint, ca.spkiFingerprint]), chain: [leaf, ca], hasDynamicList: false,
      at: now)
    XCTAssertTrue(health.hasNoOfflineBackup)
    XCTAssertEqual(health.warnings.count, 1)
    XCTAssertTrue(health.warnings[0].hasPrefix("every pin is on a certificate of the chain served now"))
    let spare = PinHealth.assess(
      policy(pins: [
        leaf.spkiFingerprint, ca.spkiFingerprint, Digest256(bytes: [UInt8](repeating: 9, count: 32))!,
      ]),
      chain: [leaf, ca], hasDynamicList: false, at: now)
    XCTAssertFalse(spare.hasNoOfflineBackup)
    XCTAssertEqual(spare.warnings, [])
  }

  func testAFarExpiryAndADynamicListRaiseNothing() {
    let leaf = certificate("leaf", key: 1, expiresInDays: 200)
    let health = PinHealth.assess(
      policy(pins: [leaf.spkiFingerprint]), chain: [leaf], hasDynamicList: true, at: now)
    XCTAssertFalse(health.isSinglePin)
    XCTAssertEqual(health.warnings, [])
  }

  func testTheConfigurationAloneKnowsASinglePinAndCertificateModeExpiry() {
    let single = PinHealth.configured(
      policy(pins: [Digest256(bytes: [UInt8](repeating: 7, count: 32))!]), hasDynamicList: false, at: now)
    XCTAssertEqual(single.warnings.count, 1)
    XCTAssertFalse(single.chainSeen)
    var pinned = SecurityPolicy()
    pinned.pinningMode = .certificate
    pinned.pinnedCertificates = [
      certificate("a", key: 1, expiresInDays: 3), certificate("b", key: 2, expiresInDays: 20),
    ]
    let health = PinHealth.configured(pinned, hasDynamicList: false, at: now)
    XCTAssertEqual(health.matched?.subject, "CN=b", "the pinned certificate that expires last")
    XCTAssertEqual(health.daysToExpiry, 20)
    XCTAssertTrue(
      health.warnings.contains { $0.contains("every pinned certificate expires within 20 days") },
      "\(health.warnings)")
  }

  func testNoPinningModeHasNoPins() {
    XCTAssertEqual(PinHealth.pins(of: SecurityPolicy()), [])
  }
}
