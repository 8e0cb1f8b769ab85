import PinConfig
import XCTest

@testable import PinProxy

/// The upstream budget's limits follow the descriptor limit, and its counts
/// come back exactly once per socket and per client use.
final class UpstreamBudgetTests: XCTestCase {
  func testLimitsFollowTheDescriptorLimitAndLeaveClientsTheirShare() {
    var limits = LimitsConfig()
    limits.maxConnections = 4096
    limits.maxConnectionsPerClient = 1024
    let small = UpstreamBudget(limits: limits, descriptorLimit: 256)
    XCTAssertEqual(small.socketLimit, 256 - 128 - 64)
    XCTAssertEqual(small.perClientLimit, 16)
    let large = UpstreamBudget(limits: limits, descriptorLimit: 65536)
    XCTAssertEqual(large.socketLimit, 65536 - 4096 - 64)
    XCTAssertEqual(large.perClientLimit, 1024)
    XCTAssertEqual(UpstreamBudget(limits: limits, descriptorLimit: 64).socketLimit, 16)
  }

  func testChargesStopAtEachLimitAndComeBackOnce() throws {
    var limits = LimitsConfig()
    limits.maxConnectionsPerClient = 1024
    let budget = UpstreamBudget(limits: limits, descriptorLimit: 256)  // 64 in all, 16 per client
    var charges = (0..<16).compactMap { _ in budget.chargeSocket(client: "a") }
    XCTAssertEqual(charges.count, 16)
    XCTAssertNil(budget.chargeSocket(client: "a"), "past the per-client limit")
    XCTAssertNotNil(budget.chargeSocket(client: "b")?.releaseAll())
    // Pooled: the socket stays counted in all, no longer against its client.
    charges[0].releaseClient()
    charges[0].releaseClient()
    XCTAssertEqual(budget.sockets(of: "a"), 15)
    XCTAssertEqual(budget.openSockets, 16)
    XCTAssertTrue(budget.chargeClient("b"))
    charges[0].assign(to: "b")
    XCTAssertEqual(budget.sockets(of: "b"), 1)
    charges[0].releaseAll()
    charges[0].releaseAll()
    XCTAssertEqual(budget.sockets(of: "b"), 0)
    XCTAssertEqual(budget.openSockets, 15)
    charges.removeAll()  // deinit releases the rest
    XCTAssertEqual(budget.openSockets, 0)
    XCTAssertEqual(budget.sockets(of: "a"), 0)
    // The total: 64 across clients.
    let many = (0..<80).compactMap { budget.chargeSocket(client: "c\($0 % 8)") }
    XCTAssertEqual(many.count, 64)
  }

  func testAConnectionWithoutASocketIsServedAtItsAddressCapAndTheHolderIsRefused() {
    var limits = LimitsConfig()
    limits.maxConnectionsPerClient = 1024
    let budget = UpstreamBudget(limits: limits, descriptorLimit: 256)  // 64 in all, 16 per client
    let hog = UpstreamBudget.connectionID()
    let held = (0..<16).compactMap { _ in budget.chargeSocket(client: "127.0.0.0/8", connection: hog) }
    XCTAssertEqual(held.count, 16)
    XCTAssertNil(budget.chargeSocket(client: "127.0.0.0/8", connection: hog), "the holder is at the cap")
    // Another program on the same host: its connection holds nothing yet.
    let newcomer = UpstreamBudget.connectionID()
    let first = budget.chargeSocket(client: "127.0.0.0/8", connection: newcomer)
    XCTAssertNotNil(first, "a connection's first socket is never refused for its address's cap")
    XCTAssertNil(budget.chargeSocket(client: "127.0.0.0/8", connection: newcomer), "only the first")
    let pooledTaker = UpstreamBudget.connectionID()
    XCTAssertTrue(budget.chargeClient("127.0.0.0/8", connection: pooledTaker), "a pooled socket too")
    XCTAssertFalse(budget.chargeClient("127.0.0.0/8", connection: hog))
    // Back below the cap, the holder may grow again.
    first?.releaseAll()
    budget.releaseClient("127.0.0.0/8", connection: pooledTaker)
    held[0].releaseAll()
    XCTAssertEqual(budget.sockets(of: "127.0.0.0/8"), 15)
    let regrown = budget.chargeSocket(client: "127.0.0.0/8", connection: hog)
    XCTAssertNotNil(regrown)
    // The total still bounds everyone.
    let rest = (0..<100).compactMap { _ in
      budget.chargeSocket(client: "127.0.0.0/8", connection: UpstreamBudget.connectionID())
    }
    XCTAssertEqual(budget.openSockets, 64)
    XCTAssertEqual(rest.count, 64 - 16)
    withExtendedLifetime((held, regrown)) {}
  }

  /// Random charges and releases by several connections of a few addresses
  /// (and by no connection): every decision and count agrees with a plain
  /// model of the rule, through entries going idle, coming back and being
  /// swept past the idle bound.
  func testDecisionsAgreeWithAModelOfTheRule() {
    checkAgainstTheModel { BudgetClient($0) }
  }

  /// The same with each address's key made once and kept, as a session's
  /// acquirer keeps it: the entry a key remembers is used while it is in
  /// the table and looked up again once swept, and a second budget never
  /// takes the first one's entries for its own.
  func testKeysThatRememberTheirEntriesAgreeWithTheModel() {
    var keys: [String: BudgetClient] = [:]
    checkAgainstTheModel { client in
      if let key = keys[client] { return key }
      let key = BudgetClient(client)
      keys[client] = key
      return key
    }
    let other = UpstreamBudget(limits: LimitsConfig(), descriptorLimit: 4096)
    for key in keys.values {
      XCTAssertEqual(other.sockets(of: key), 0)
      XCTAssertTrue(other.chargeClient(key, connection: 1))
      XCTAssertEqual(other.sockets(of: key), 1)
    }
  }

  private func checkAgainstTheModel(key: (String) -> BudgetClient) {
    var limits = LimitsConfig()
    limits.maxConnectionsPerClient = 3
    let budget = UpstreamBudget(limits: limits, descriptorLimit: 4096)
    let cap = budget.perClientLimit
    var model: [String: [UInt64: Int]] = [:]
    var generator = SystemRandomNumberGenerator()
    let connections: [UInt64] = [0] + (0..<5).map { _ in UpstreamBudget.connectionID() }
    for step in 0..<20_000 {
      // Many addresses now and then, so that idle entries pass the bound.
      let client = step % 500 < 450 ? "c\(Int.random(in: 0..<3, using: &generator))" : "n\(step)"
      let connection = connections.randomElement(using: &generator)!
      var counts = model[client, default: [:]]
      let total = counts.values.reduce(0, +)
      if Bool.random(using: &generator) {
        let allowed = total < cap || (connection != 0 && counts[connection, default: 0] == 0)
        XCTAssertEqual(
          budget.chargeClient(key(client), connection: connection), allowed, "step \(step)")
        if allowed { counts[connection, default: 0] += 1 }
      } else if counts[connection, default: 0] > 0 {
        budget.releaseClient(key(client), connection: connection)
        counts[connection]! -= 1
      }
      model[client] = counts
      XCTAssertEqual(budget.sockets(of: key(client)), counts.values.reduce(0, +), "step \(step)")
    }
  }
}
