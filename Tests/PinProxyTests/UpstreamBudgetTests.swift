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
}
