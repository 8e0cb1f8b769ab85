import PinConfig
import PinHTTP
import XCTest

@testable import PinProxy

/// The router's per-connection memo: a repeated request reuses the last
/// decision, and anything that could change the decision misses it.
final class ForwardRouterTests: XCTestCase {
  static let config = """
    listeners:
      - {name: forward, address: "127.0.0.1:3128", mode: forward, allowedConnectPorts: [443, 80]}
    defaults: {action: deny}
    domains:
      - {domain: origin.test, allowsInsecureHTTPLoads: true}
      - {domain: secure.test}
    """

  func makeRouter() throws -> ForwardRouter {
    let configuration = try ConfigurationParser.parse(ForwardRouterTests.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    return ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0])
  }

  func head(_ target: String) throws -> HTTPRequestHead {
    var parser = HTTP1Parser(role: .request, limits: HTTPLimits(), pausesBetweenMessages: true)
    let events = try parser.feed(Array("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
    for case .request(let head) in events { return head }
    throw HTTPParseError(.badRequest, "no head")
  }

  func forwarded(_ decision: RoutingDecision) -> ForwardTarget? {
    if case .forward(let target) = decision { return target }
    return nil
  }

  func testRepeatedHostReusesTheDecisionWithTheNewPath() throws {
    var router = try makeRouter()
    let first = try XCTUnwrap(forwarded(router.route(try head("http://origin.test/a"), inside: nil)))
    let second = try XCTUnwrap(forwarded(router.route(try head("http://origin.test/b?c"), inside: nil)))
    XCTAssertEqual(first.key, second.key)
    XCTAssertEqual(second.path, "/b?c")
    XCTAssertFalse(second.key.tls, "allowsInsecureHTTPLoads keeps http:// plain")
  }

  func testADifferentSchemeHostOrPortIsDecidedAfresh() throws {
    var router = try makeRouter()
    _ = router.route(try head("http://origin.test/"), inside: nil)
    let secure = try XCTUnwrap(forwarded(router.route(try head("http://secure.test/"), inside: nil)))
    XCTAssertTrue(secure.key.tls, "a rule without allowsInsecureHTTPLoads upgrades to TLS")
    XCTAssertEqual(secure.key.port, 443)
    let https = try XCTUnwrap(forwarded(router.route(try head("https://origin.test/"), inside: nil)))
    XCTAssertTrue(https.key.tls)
    guard case .refuse(let port) = router.route(try head("http://origin.test:8080/"), inside: nil) else {
      return XCTFail("port 8080 is not in allowedConnectPorts")
    }
    XCTAssertEqual(port.status, 403)
    guard case .refuse(let denied) = router.route(try head("http://other.test/"), inside: nil) else {
      return XCTFail("a host without a rule is denied")
    }
    XCTAssertEqual(denied.code, .deniedByPolicy)
    // A refusal is never remembered: the allowed host still routes after it.
    XCTAssertNotNil(forwarded(router.route(try head("http://origin.test/"), inside: nil)))
  }

  /// Routers of different connections under one snapshot share its table of
  /// host routes: the second connection finds the host decided, denied and
  /// invalid names included, with the same answers as the first; the table
  /// stays within its bound however many names clients send.
  func testConnectionsShareTheSnapshotsHostRoutesWithinABound() throws {
    let configuration = try ConfigurationParser.parse(ForwardRouterTests.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    var first = ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0])
    var second = ForwardRouter(snapshot: snapshot, listener: configuration.listeners[0])
    let one = try XCTUnwrap(forwarded(first.route(try head("http://Origin.test/a"), inside: nil)))
    let two = try XCTUnwrap(forwarded(second.route(try head("http://Origin.test/b"), inside: nil)))
    XCTAssertEqual(one.key, two.key)
    XCTAssertEqual(two.route.ruleName, "origin.test")
    for router in [first, second] {
      var router = router
      guard case .refuse(let denied) = router.route(try head("http://other.test/"), inside: nil) else {
        return XCTFail("a host without a rule is denied, cached or not")
      }
      XCTAssertEqual(denied.status, 403)
      guard case .refuse(let invalid) = router.route(try head("http://bad_host!/"), inside: nil) else {
        return XCTFail("an invalid name is refused, cached or not")
      }
      XCTAssertEqual(invalid.status, 400)
    }
    for index in 0..<(HostRoutes.capacity + 50) {
      _ = snapshot.hostRoutes.route("h\(index).other.test", under: snapshot)
    }
    XCTAssertLessThanOrEqual(snapshot.hostRoutes.count, HostRoutes.capacity)
    guard case .route(let again) = snapshot.hostRoutes.route("origin.test", under: snapshot) else {
      return XCTFail("a host is routed again after the table started over")
    }
    XCTAssertEqual(again.ruleName, "origin.test")
  }

  /// A new connection starts from the decision the loop's last connection
  /// left (`ForwardRouter.Memo`) only under the same snapshot and listener:
  /// after a reload that denies the host, the new router refuses it.
  func testANewConnectionReusesTheLastDecisionOnlyUnderItsSnapshotAndListener() throws {
    let configuration = try ConfigurationParser.parse(ForwardRouterTests.config, file: "test.yaml")
    let snapshot = try RuntimeSnapshot.compile(configuration, generation: 1)
    let bound = BoundListener(configuration.listeners[0])
    var ended = ForwardRouter(snapshot: snapshot, bound: bound)
    XCTAssertNil(ended.memo, "nothing decided yet")
    let first = try XCTUnwrap(forwarded(ended.route(try head("http://origin.test/a"), inside: nil)))
    let memo = ended.memo

    var next = ForwardRouter(snapshot: snapshot, bound: bound)
    next.adopt(memo)
    let reused = try XCTUnwrap(forwarded(next.route(try head("http://origin.test/a"), inside: nil)))
    XCTAssertTrue(reused === first, "the same decision and target, not decided again")
    let otherPath = try XCTUnwrap(forwarded(next.route(try head("http://origin.test/b"), inside: nil)))
    XCTAssertEqual(otherPath.key, first.key)

    var otherListener = ForwardRouter(snapshot: snapshot, bound: BoundListener(configuration.listeners[0]))
    otherListener.adopt(memo)
    let decided = try XCTUnwrap(forwarded(otherListener.route(try head("http://origin.test/a"), inside: nil)))
    XCTAssertFalse(decided === first, "another listener decides for itself")

    let reloaded = try ConfigurationParser.parse(
      ForwardRouterTests.config.replacingOccurrences(of: "origin.test", with: "elsewhere.test"),
      file: "test.yaml")
    var afterReload = ForwardRouter(
      snapshot: try RuntimeSnapshot.compile(reloaded, generation: 2), bound: bound)
    afterReload.adopt(memo)
    guard case .refuse(let denied) = afterReload.route(try head("http://origin.test/a"), inside: nil) else {
      return XCTFail("the reload's snapshot governs: origin.test has no rule in it")
    }
    XCTAssertEqual(denied.code, .deniedByPolicy)
  }
}
