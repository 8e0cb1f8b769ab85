import Foundation
import PinTrust
import XCTest

@testable import PinProxy

/// The sightings file `ct-hook` writes and the daemon reads: one entry per
/// certificate, at most `maximumEntries` (the oldest go), entries that do
/// not parse skipped, and a file that is not a sightings file moved aside
/// rather than blocking every later sighting.
final class IssuanceLogTests: XCTestCase {
  var path = ""

  override func setUp() {
    path = NSTemporaryDirectory() + "sightings-\(UUID().uuidString)/ct/unpinned-issuances.json"
  }

  override func tearDown() {
    try? FileManager.default.removeItem(
      atPath: ((path as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent)
  }

  func sighting(_ number: Int, identity: Int? = nil) -> IssuanceSighting {
    func digest(_ value: Int) -> Digest256 {
      Digest256(bytes: (0..<32).map { UInt8(truncatingIfNeeded: value >> (($0 % 4) * 8)) })!
    }
    return IssuanceSighting(
      names: ["n\(number).bank.example"], leafKey: digest(number), certificate: digest(number),
      identity: digest(identity ?? number), issuerKeys: number % 2 == 0 ? nil : [digest(7)],
      issuerCertificates: [digest(8)], issuer: "CN=CA \(number)",
      notBefore: Date(timeIntervalSince1970: 1_800_000_000), seen: Date(timeIntervalSince1970: 1_800_000_100))
  }

  func testOneEntryPerCertificateAndTheOldestGoPastTheBound() throws {
    XCTAssertEqual(try IssuanceLog.read(path), [], "no file yet: nothing seen")
    XCTAssertTrue(try IssuanceLog.record(sighting(1), in: path))
    XCTAssertFalse(try IssuanceLog.record(sighting(1), in: path), "the same certificate again")
    XCTAssertFalse(
      try IssuanceLog.record(sighting(2, identity: 1), in: path), "its precertificate (same TBS)")
    XCTAssertEqual(try IssuanceLog.read(path), [sighting(1)], "read back as written")
    // A full file (written at once: a record per sighting rewrites it),
    // then ten more through `record`.
    let full = (1...IssuanceLog.maximumEntries).map { IssuanceLog.encode(sighting($0)) }
    try JSONSerialization.data(withJSONObject: ["sightings": full]).write(to: URL(fileURLWithPath: path))
    for number in (IssuanceLog.maximumEntries + 1)...(IssuanceLog.maximumEntries + 10) {
      try IssuanceLog.record(sighting(number), in: path)
    }
    let kept = try IssuanceLog.read(path)
    XCTAssertEqual(kept.count, IssuanceLog.maximumEntries)
    XCTAssertEqual(kept.first, sighting(11))
    XCTAssertEqual(kept.last, sighting(IssuanceLog.maximumEntries + 10))
  }

  func testHostileEntriesAreSkippedAndAForeignFileIsMovedAside() throws {
    try IssuanceLog.record(sighting(1), in: path)
    let good = try String(contentsOfFile: path, encoding: .utf8)
    let bad = good.replacingOccurrences(of: "\"sightings\" : [", with: "\"sightings\" : [{\"names\": 5}, ")
    try bad.write(toFile: path, atomically: true, encoding: .utf8)
    XCTAssertEqual(try IssuanceLog.read(path), [sighting(1)])

    try "not json".write(toFile: path, atomically: true, encoding: .utf8)
    XCTAssertThrowsError(try IssuanceLog.read(path))
    XCTAssertTrue(try IssuanceLog.record(sighting(2), in: path))
    XCTAssertEqual(try IssuanceLog.read(path), [sighting(2)])
    XCTAssertEqual(try String(contentsOfFile: path + ".bad", encoding: .utf8), "not json")
  }
}
