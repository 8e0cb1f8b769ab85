import PinTrust
import XCTest

@testable import PinProxy

/// `UpstreamLinks`, the handles an exchange host's machine holds in place
/// of its upstream links: a handle names its link only while the host
/// holds it, and never the next link put in the same slot.
final class UpstreamLinksTests: XCTestCase {
  typealias Link = DownstreamHTTP2StreamTests.RecordingLink
  let key = UpstreamKey(
    host: TrustHost("origin.test")!, port: 443, tls: true,
    policy: PolicyIdentity(generation: 1, rule: .domain(0)))

  func testAHandleNamesItsLinkUntilLetGoAndNeverTheSlotsNextLink() {
    var links = UpstreamLinks()
    let first = Link(key: key)
    let handle = links.hold(first)
    XCTAssertTrue(links[handle] === first)
    XCTAssertEqual(links.handle(of: first), handle)
    XCTAssertFalse(links.isEmpty)

    XCTAssertTrue(links.letGo(handle) === first)
    XCTAssertNil(links[handle], "let go: the handle names nothing")
    XCTAssertNil(links.letGo(handle), "let go once only")
    XCTAssertNil(links.handle(of: first))
    XCTAssertTrue(links.isEmpty)

    let second = Link(key: key)
    let next = links.hold(second)
    XCTAssertEqual(next.slot, handle.slot, "a freed slot is used again")
    XCTAssertNotEqual(next, handle)
    XCTAssertFalse(next.isSame(as: handle))
    XCTAssertNil(links[handle], "the old handle does not reach the slot's new link")
    XCTAssertTrue(links[next] === second)
  }

  func testTwoLinksAreHeldApartAndAllAreLetGoTogether() {
    var links = UpstreamLinks()
    let (a, b) = (Link(key: key), Link(key: key))
    let (handleA, handleB) = (links.hold(a), links.hold(b))
    XCTAssertNotEqual(handleA.slot, handleB.slot)
    XCTAssertTrue(links[handleA] === a)
    XCTAssertTrue(links[handleB] === b)
    XCTAssertNil(links.handle(of: Link(key: key)), "a link not held has no handle")

    let all = links.letGoAll()
    XCTAssertEqual(all.count, 2)
    XCTAssertTrue(links.isEmpty)
    XCTAssertNil(links[handleA])
    XCTAssertNil(links[handleB])
  }

  func testAHandleIsEightBytesAndTriviallyCopyable() {
    XCTAssertEqual(MemoryLayout<UpstreamRef>.size, 8)
    XCTAssertTrue(_isPOD(UpstreamRef.self))
  }
}
