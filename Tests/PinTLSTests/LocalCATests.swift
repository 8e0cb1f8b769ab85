import Dispatch
import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

final class LocalCATests: XCTestCase {
  var directory: String!

  override func setUp() {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString)").path
  }

  override func tearDown() { try? FileManager.default.removeItem(atPath: directory) }

  func testCreateWritesAPrivateKeyAndLoadingAgainDoesNotRecreate() throws {
    let (first, created) = try LocalCA.loadOrCreate(in: directory)
    XCTAssertTrue(created)
    let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/ca.key")
    XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
    let value = first.certificate.value()
    XCTAssertTrue(value.subject.contains("CN=pinproxy local CA"), value.subject)
    XCTAssertGreaterThan(value.notAfter.timeIntervalSinceNow, 9 * 365 * 86_400)
    let (second, createdAgain) = try LocalCA.loadOrCreate(in: directory)
    XCTAssertFalse(createdAgain)
    XCTAssertEqual(second.certificate.der, first.certificate.der)
    XCTAssertThrowsError(try LocalCA.create(in: directory)) { error in
      XCTAssertTrue("\(error)".contains("already holds a CA"), "\(error)")
    }
  }

  func testMintedLeavesVerifyAgainstTheCAForTheirHostOnly() throws {
    let (ca, _) = try LocalCA.loadOrCreate(in: directory)
    let harness = PolicyHarness(registry: AnchorSetRegistry(systemOverride: [ca.certificate]), time: Date())
    for host in ["api.bank.example", "127.0.0.1", "[::1]"] {
      let leaf = try ca.leaf(for: Fixtures.host(host))
      let value = leaf.value()
      XCTAssertLessThanOrEqual(value.notAfter.timeIntervalSinceNow, 7 * 86_400)
      let decision = harness.evaluate(.default, chain: PresentedChain([leaf.der]), host: host)
      XCTAssertTrue(decision.isTrusted, "\(host): \(decision.summary)")
    }
    let leaf = try ca.leaf(for: Fixtures.host("api.bank.example"))
    XCTAssertFalse(
      harness.evaluate(.default, chain: PresentedChain([leaf.der]), host: "other.example").isTrusted)
  }

  func testEachHostIsMintedOnceEvenUnderConcurrencyAndTheCacheIsBounded() throws {
    try LocalCA.create(in: directory)
    let ca = try LocalCA.load(certificate: directory + "/ca.pem", key: directory + "/ca.key", cacheSize: 16)
    let hosts = (0..<8).map { Fixtures.host("host\($0).example") }
    DispatchQueue.concurrentPerform(iterations: 400) { index in
      _ = try? ca.leaf(for: hosts[index % hosts.count])
    }
    XCTAssertEqual(ca.mintedCount, 8, "one mint per host")
    for index in 0..<40 { _ = try ca.leaf(for: Fixtures.host("many\(index).example")) }
    XCTAssertEqual(ca.cachedCount, 16)
  }

  func testAnOperatorSuppliedIntermediateIsSentInTheChain() throws {
    let ca = try LocalCA.load(certificate: Fixtures.path("int-a.pem"), key: Fixtures.path("int-a.key"))
    XCTAssertEqual(ca.chain.count, 1)
    let leaf = try ca.leaf(for: Fixtures.host("intercepted.example"))
    let harness = PolicyHarness(
      registry: AnchorSetRegistry(systemOverride: Fixtures.x509("root-a.pem")), time: Date())
    let chain = PresentedChain([leaf.der] + ca.chain.map(\.der))
    XCTAssertTrue(harness.evaluate(.default, chain: chain, host: "intercepted.example").isTrusted)
  }

  func testKeyThatDoesNotMatchIsRefused() throws {
    XCTAssertThrowsError(
      try LocalCA.load(certificate: Fixtures.path("int-a.pem"), key: Fixtures.path("httpbin.key"))
    ) {
      XCTAssertTrue("\($0)".contains("does not belong"), "\($0)")
    }
  }

  func testConcurrentFirstStartsAgreeOnOneCA() throws {
    let directory = self.directory!
    nonisolated(unsafe) var loaded: [[UInt8]] = []
    let lock = NSLock()
    DispatchQueue.concurrentPerform(iterations: 8) { _ in
      if let (ca, _) = try? LocalCA.loadOrCreate(in: directory) {
        lock.withLock { loaded.append(ca.certificate.der) }
      }
    }
    XCTAssertEqual(loaded.count, 8, "every start loads a matching pair")
    XCTAssertEqual(Set(loaded).count, 1, "all of them the same CA")
  }
}
