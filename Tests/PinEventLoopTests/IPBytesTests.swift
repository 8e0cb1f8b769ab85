import Glibc
import XCTest

@testable import PinEventLoop

/// `IPBytes`, the inline address an accepted peer is known by: the same
/// bytes as the array it replaces, read from a real socket address.
final class IPBytesTests: XCTestCase {
  func testItHoldsTheBytesItWasGivenAndComparesByThem() {
    let v4 = IPBytes([192, 0, 2, 7])
    XCTAssertEqual(v4.count, 4)
    XCTAssertEqual(Array(v4), [192, 0, 2, 7])
    XCTAssertEqual(v4.array, [192, 0, 2, 7])
    XCTAssertEqual(v4, IPBytes([192, 0, 2, 7]))
    XCTAssertNotEqual(v4, IPBytes([192, 0, 2, 8]))
    // The same leading bytes in a longer address are another address.
    XCTAssertNotEqual(IPBytes([0, 0, 0, 0]), IPBytes(Array(repeating: 0, count: 16)))
    XCTAssertEqual(Set([v4, IPBytes([192, 0, 2, 7]), IPBytes([10, 0, 0, 1])]).count, 2)
    XCTAssertEqual(IPBytes().count, 0)
    XCTAssertEqual(IPBytes().array, [])
  }

  func testMappedAddressesUnmapAndMapBack() {
    let mapped = IPBytes(Array(repeating: 0, count: 10) + [0xff, 0xff, 127, 0, 0, 1])
    XCTAssertEqual(mapped.unmappedIPv4, IPBytes([127, 0, 0, 1]))
    XCTAssertEqual(IPBytes([127, 0, 0, 1]).mappedIPv6, mapped)
    let v6 = IPBytes([0x20, 0x01, 0x0d, 0xb8] + Array(repeating: 0, count: 11) + [1])
    XCTAssertEqual(v6.unmappedIPv4, v6)
    XCTAssertEqual(IPBytes([10, 1, 2, 3]).unmappedIPv4, IPBytes([10, 1, 2, 3]))
  }

  func testLoopbackIsTheWholeIPv4BlockAndIPv6One() {
    XCTAssertTrue(IPBytes([127, 0, 0, 1]).isLoopback)
    XCTAssertTrue(IPBytes([127, 9, 8, 7]).isLoopback)
    XCTAssertFalse(IPBytes([128, 0, 0, 1]).isLoopback)
    XCTAssertTrue(IPBytes(Array(repeating: 0, count: 15) + [1]).isLoopback)
    XCTAssertFalse(IPBytes(Array(repeating: 0, count: 15) + [2]).isLoopback)
    XCTAssertFalse(IPBytes().isLoopback)
  }

  func testASocketAddressGivesTheSameBytesInlineAsInAnArray() throws {
    let v4 = try XCTUnwrap(SocketAddress(ip: "203.0.113.9", port: 8080))
    XCTAssertEqual(v4.ipBytes.array, v4.addressBytes)
    XCTAssertEqual(v4.ipBytes, IPBytes([203, 0, 113, 9]))
    let v6 = try XCTUnwrap(SocketAddress(ip: "2001:db8::5", port: 443))
    XCTAssertEqual(v6.ipBytes.array, v6.addressBytes)
    XCTAssertEqual(v6.ipBytes.count, 16)
    v6.ipBytes.withUnsafeBytes { XCTAssertEqual(Array($0), v6.addressBytes) }
  }
}
