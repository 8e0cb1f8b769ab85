import PinEventLoop
import XCTest

@testable import PinProxy

/// A loop's registry lists sessions by slot: each listed once, unlisted
/// once, slots reused, and only listed sessions reached by a drain or an
/// eviction.
final class SessionRegistryTests: XCTestCase {
  final class Session: DrainableSession {
    var registrySlot = RegistrySlot()
    var drained = 0
    var evicted = 0
    let clientKey: String
    let idleSince: UInt64
    init(_ key: String, idleSince: UInt64) { (clientKey, self.idleSince) = (key, idleSince) }
    func drain() { drained += 1 }
    var evictionCandidate: EvictionCandidate? { EvictionCandidate(tier: .idleKeepAlive, since: idleSince) }
    func evict() { evicted += 1 }
    var clientPeer: String { clientKey }
    func reviewAccess(under snapshot: RuntimeSnapshot) {}
  }

  func testSessionsAreListedOnceAndOnlyListedOnesAreReached() {
    let group = EventLoopGroup(count: 1)
    let loop = group.next()
    loop.runAndWait {
      let registry = SessionRegistry(loop: loop)
      let (a, b, c) = (Session("a", idleSince: 3), Session("b", idleSince: 1), Session("c", idleSince: 2))
      for session in [a, b, c, a] { registry.add(session) }
      XCTAssertEqual(registry.count, 3, "added twice, listed once")
      registry.remove(b)
      registry.remove(b)
      XCTAssertEqual(registry.count, 2)
      let d = Session("d", idleSince: 4)
      registry.add(d)
      XCTAssertEqual(registry.count, 3, "b's slot went to d")
      registry.drainAll()
      XCTAssertEqual([a, b, c, d].map(\.drained), [1, 0, 1, 1])
      XCTAssertTrue(registry.evictOne())
      XCTAssertEqual([a, b, c, d].map(\.evicted), [0, 0, 1, 0], "the longest idle listed session")
      XCTAssertTrue(registry.evictOne(client: "d"))
      XCTAssertEqual(d.evicted, 1)
      XCTAssertFalse(registry.evictOne(client: "b"), "an unlisted session is not reached")
      registry.forget(c)
      registry.forget(c)
      XCTAssertEqual(registry.count, 2)
    }
  }
}
