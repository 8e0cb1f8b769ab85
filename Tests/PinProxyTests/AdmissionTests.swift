import PinConfig
import PinEventLoop
import PinTrust
import Synchronization
import XCTest

@testable import PinProxy

/// Connection admission: who counts as one client, and who goes first when
/// the process is at its limit.
final class AdmissionTests: XCTestCase {
  func testClientAddressKeys() {
    XCTAssertEqual(ClientKey.of("192.0.2.7:5555"), "192.0.2.7")
    XCTAssertEqual(ClientKey.of("127.0.0.1:5555"), "127.0.0.0/8")
    XCTAssertEqual(ClientKey.of("127.9.8.7:1"), "127.0.0.0/8")
    XCTAssertEqual(ClientKey.of("[2001:db8::1]:443"), "2001:db8::/64")
    XCTAssertEqual(ClientKey.of("[2001:db8::ffff:1]:443"), "2001:db8::/64")
    XCTAssertEqual(ClientKey.of("[::ffff:192.0.2.7]:443"), "192.0.2.7")
  }

  /// A loop's memo of its last key gives what the shared table gives, for
  /// the same client again and for each way the next one differs: another
  /// address, another user, an unknown user, a remote peer.
  func testTheLoopsClientKeyMemoAgreesWithTheTable() {
    var memo = ClientKeyMemo()
    let loopback: [UInt8] = [127, 0, 0, 1]
    let alice = LocalPeer(owner: SocketOwner(uid: 1000, inode: 1))
    let bob = LocalPeer(owner: SocketOwner(uid: 1001, inode: 2))
    let unknown = LocalPeer(owner: nil)
    let cases: [([UInt8], LocalPeer?, String)] = [
      (loopback, alice, "127.0.0.0/8 uid 1000"), (loopback, alice, "127.0.0.0/8 uid 1000"),
      (loopback, bob, "127.0.0.0/8 uid 1001"), (loopback, unknown, "127.0.0.0/8 uid unknown"),
      (loopback, nil, "127.0.0.0/8"), ([192, 0, 2, 7], nil, "192.0.2.7"), ([192, 0, 2, 8], nil, "192.0.2.8"),
      ([192, 0, 2, 8], alice, "192.0.2.8 uid 1000"), ([192, 0, 2, 8], nil, "192.0.2.8"),
    ]
    for (address, local, expected) in cases {
      XCTAssertEqual(memo.key(bytes: IPBytes(address), local: local), expected)
      XCTAssertEqual(ClientKey.of(bytes: address, local: local), expected)
    }
  }

  /// A loop remembers the entry its last client was counted under and
  /// counts the next connection of that client under it, hashing nothing;
  /// never one the table dropped, and never for another client's key.
  func testARememberedEntryCountsOnlyItsOwnClientAndOnlyWhileListed() throws {
    let admission = ConnectionAdmission()
    var limits = LimitsConfig()
    limits.maxConnections = 1000
    limits.maxConnectionsPerClient = 2
    func admit(_ client: String, _ remembered: ClientCount?) -> (ConnectionAdmission.Decision, ClientCount?) {
      let (decision, entry) = admission.admit(client: client, remembered: remembered, limits: limits) { _ in
        false
      }
      return (decision, entry)
    }
    let (first, entry) = admit("a", nil)
    XCTAssertEqual(first, .admitted)
    let remembered = try XCTUnwrap(entry)
    let (second, again) = admit("a", remembered)
    XCTAssertEqual(second, .admitted)
    XCTAssertTrue(again === remembered)
    XCTAssertEqual(admit("a", remembered).0, .clientLimit(2), "the remembered entry carries the count")
    let (other, otherEntry) = admit("b", remembered)
    XCTAssertEqual(other, .admitted, "another client's key is counted under its own entry")
    XCTAssertFalse(otherEntry === remembered)
    admission.release(remembered)
    admission.release(remembered)
    admission.release(try XCTUnwrap(otherEntry))
    // Clients come and go: past `zeroesKept` zero entries, every one is dropped, "a"'s among them.
    for index in 0..<70 { admission.release(try XCTUnwrap(admit("c\(index)", nil).1)) }
    let (third, fresh) = admit("a", remembered)
    XCTAssertEqual(third, .admitted)
    XCTAssertFalse(fresh === remembered, "a dropped entry is never counted again")
    XCTAssertEqual(admit("a", remembered).0, .admitted)
    XCTAssertEqual(admit("a", fresh).0, .clientLimit(2), "both counted under the listed entry")
    XCTAssertEqual(admission.open.load(ordering: .relaxed), 2)
  }

  func testPerClientAndProcessLimits() {
    let admission = ConnectionAdmission()
    var limits = LimitsConfig()
    limits.maxConnections = 3
    limits.maxConnectionsPerClient = 2
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.1:1"), limits: limits) { _ in false }, .admitted)
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.1:2"), limits: limits) { _ in false }, .admitted)
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.1:3"), limits: limits) { _ in false }, .clientLimit(2))
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.2:1"), limits: limits) { _ in false }, .admitted)
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.3:1"), limits: limits) { _ in false }, .processLimit(3))
    var evicted = 0
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.3:2"), limits: limits) { _ in
        evicted += 1
        return true
      }, .admitted)
    XCTAssertEqual(evicted, 1)
    admission.release(client: ClientKey.of("192.0.2.1:1"))
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("192.0.2.1:4"), limits: limits) { _ in true }, .admitted)
  }

  /// A client whose connections all closed keeps its entry at zero (a
  /// connection per request finds it again), and more such clients than
  /// the table keeps sweep the zeros: through both, every client's limit
  /// still counts exactly its open connections.
  func testCountsAtZeroAreKeptOrSweptWithoutChangingAnyLimit() {
    let admission = ConnectionAdmission()
    var limits = LimitsConfig()
    limits.maxConnections = 10_000
    limits.maxConnectionsPerClient = 2
    let held = "192.0.2.200"
    XCTAssertEqual(admission.admit(client: held, limits: limits) { _ in false }, .admitted)
    for round in 0..<3 {
      // 100 clients each open two and close both: more zeros than are kept.
      for index in 0..<100 {
        let client = "198.51.100.\(index)"
        XCTAssertEqual(admission.admit(client: client, limits: limits) { _ in false }, .admitted, "\(round)")
        XCTAssertEqual(admission.admit(client: client, limits: limits) { _ in false }, .admitted, "\(round)")
        XCTAssertEqual(admission.admit(client: client, limits: limits) { _ in false }, .clientLimit(2))
        admission.release(client: client)
        admission.release(client: client)
        // A client count released once too often stays at zero.
        admission.release(client: client, countedOpen: false)
      }
    }
    // The client holding a connection throughout still has one of its two.
    XCTAssertEqual(admission.admit(client: held, limits: limits) { _ in false }, .admitted)
    XCTAssertEqual(admission.admit(client: held, limits: limits) { _ in false }, .clientLimit(2))
    XCTAssertEqual(admission.open.load(ordering: .relaxed), 2)
  }

  /// At one client's limit a spare connection of that client (and only of
  /// that client) is evicted to admit the new one.
  func testPerClientLimitEvictsAmongThatClient() {
    let admission = ConnectionAdmission()
    var limits = LimitsConfig()
    limits.maxConnectionsPerClient = 1
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("127.0.0.1:1"), limits: limits) { _ in false }, .admitted)
    var asked: [String?] = []
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("127.0.0.2:2"), limits: limits) { client in
        asked.append(client)
        return true
      }, .admitted)
    XCTAssertEqual(asked, ["127.0.0.0/8"])
    XCTAssertEqual(
      admission.admit(client: ClientKey.of("127.0.0.3:3"), limits: limits) { _ in false }, .clientLimit(1))
  }

  func testEvictionOrder() {
    let idleOld = EvictionCandidate(tier: .idleKeepAlive, since: 10)
    let idleNew = EvictionCandidate(tier: .idleKeepAlive, since: 20)
    let slowHead = EvictionCandidate(tier: .unfinishedHead, since: 1)
    let silentSplice = EvictionCandidate(tier: .idleSplice, since: 0)
    XCTAssertEqual(
      [silentSplice, slowHead, idleNew, idleOld].sorted(), [idleOld, idleNew, slowHead, silentSplice])
  }

  func testInternalAddresses() {
    let guarded = InternalAddresses(
      listening: [HostPort(host: "0.0.0.0", port: 3128)], local: [[192, 0, 2, 50]])
    func refused(_ text: String, _ port: Int = 443) -> Bool {
      guarded.refusal(IPAddress(text)!, port: port) != nil
    }
    for text in [
      "127.0.0.1", "127.255.0.9", "::1", "::ffff:127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1",
      "169.254.169.254", "fe80::1", "0.0.0.0", "::", "192.0.2.50",
    ] {
      XCTAssertTrue(refused(text), text)
    }
    XCTAssertTrue(refused("192.0.2.99", 3128), "any address on the listener's port when it binds 0.0.0.0")
    for text in ["192.0.2.99", "8.8.8.8", "2001:db8::1", "2001:db8::2"] {
      XCTAssertFalse(refused(text), text)
    }
  }
}
