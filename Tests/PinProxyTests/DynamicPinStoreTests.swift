import Foundation
import PinConfig
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

@testable import PinProxy

/// The per-rule store: a restart reads what was stored; a corrupt or
/// tampered file is reported and ignored (the fallback applies), never a crash.
final class DynamicPinStoreTests: XCTestCase {
  var directory = ""
  var signer: PrivateKey!

  override func setUpWithError() throws {
    signer = try PrivateKey.generateP256()
    directory =
      FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)").path
  }

  override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

  func spec(fallback: PinListDocument? = nil) throws -> DynamicPinSpec {
    var config = DynamicPinsConfig(
      url: "https://pins.example/list", urlLocation: Location(line: 1, column: 1, key: "url"),
      publicKey: try XCTUnwrap(signer.pinListPublicKey),
      publicKeyLocation: Location(line: 1, column: 1, key: "publicKey"))
    config.expectedCommonNames = ["httpbin.org"]
    return DynamicPinSpec(
      config: config, ruleDomain: "httpbin.org", stateDirectory: directory, url: InternalURL(config.url)!,
      verifier: try PinListPublicKey(base64: config.publicKey), fallback: fallback)
  }

  func signedEntry(days: Double = 30) throws -> PinListEntry {
    var entry = PinListEntry(
      name: "httpbin.org", fingerprint: Fixtures.certificate("httpbin.pem").fingerprint,
      expires: Date().addingTimeInterval(days * 86_400).rounded)
    entry.signature = try signer.signSHA256(entry.signedMessage)
    return entry
  }

  func testAnInstalledListIsReadBackAfterARestart() throws {
    let spec = try spec()
    var warnings: [String] = []
    let store = DynamicPinStore(spec: spec, at: Date()) { warnings.append($0) }
    XCTAssertEqual(store.snapshot.list.source, .none)
    let first = store.version
    store.install(PinList(entries: [try signedEntry()], source: .fetched, updated: Date()), at: Date())
    XCTAssertGreaterThan(store.version, first)
    let files = try FileManager.default.contentsOfDirectory(atPath: directory + "/pins")
    XCTAssertEqual(files.count, 1, "no temporary file left behind: \(files)")
    let restarted = DynamicPinStore(spec: spec, at: Date()) { warnings.append($0) }
    XCTAssertEqual(restarted.snapshot.list.source, .stored)
    XCTAssertEqual(restarted.snapshot.list.entries.count, 1)
    XCTAssertEqual(warnings, [])
  }

  func testACorruptFileIsIgnoredAndTheFallbackApplies() throws {
    let fallbackEntry = PinListEntry(
      name: "httpbin.org", fingerprint: Fixtures.certificate("int-a.pem").fingerprint,
      expires: Date().addingTimeInterval(86_400))
    let spec = try spec(fallback: PinListDocument(entries: [fallbackEntry]))
    try FileManager.default.createDirectory(atPath: directory + "/pins", withIntermediateDirectories: true)
    try Data("{\"fingerprints\": [tru".utf8).write(to: URL(fileURLWithPath: spec.file))
    var warnings: [String] = []
    let store = DynamicPinStore(spec: spec, at: Date()) { warnings.append($0) }
    XCTAssertEqual(store.snapshot.list.source, .fallback)
    XCTAssertEqual(warnings.count, 1)
    XCTAssertTrue(warnings[0].contains("corrupt"), warnings[0])
  }

  func testAFileWhoseEntriesFailTheirSignaturesIsIgnored() throws {
    let spec = try spec()
    var entry = try signedEntry()
    entry.fingerprint = Fixtures.certificate("adn.pem").fingerprint
    _ = DynamicPinStore.write(PinListDocument(entries: [entry]).json(), to: spec.file)
    var warnings: [String] = []
    let store = DynamicPinStore(spec: spec, at: Date()) { warnings.append($0) }
    XCTAssertEqual(store.snapshot.list.source, .none)
    XCTAssertTrue(warnings.first?.contains("fails its signature") ?? false, "\(warnings)")
  }

  func testAnUnchangedListKeepsItsVersion() throws {
    let store = DynamicPinStore(spec: try spec(), at: Date()) { _ in }
    let list = PinList(entries: [try signedEntry()], source: .fetched, updated: Date())
    store.install(list, at: Date())
    let version = store.version
    store.install(list, at: Date())
    XCTAssertEqual(store.version, version, "cached verdicts and pooled connections survive a no-op update")
  }
}

extension Date {
  fileprivate var rounded: Date { Date(timeIntervalSince1970: timeIntervalSince1970.rounded(.down)) }
}
