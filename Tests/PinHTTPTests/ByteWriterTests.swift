import XCTest

@testable import PinHTTP

final class ByteWriterTests: XCTestCase {
  func testPiecesLandAfterWhatTheArrayHeldInOrder() {
    var bytes: [UInt8] = Array("kept|".utf8)
    let written = bytes.appendWriting(room: 64) { out -> Int in
      out.put("GET")
      out.put(0x20)
      out.put(String(repeating: "x", count: 40))  // not a small string
      let bar = Array("|".utf8)
      bar.withUnsafeBufferPointer { out.put($0) }
      return out.count
    }
    XCTAssertEqual(
      String(decoding: bytes, as: UTF8.self), "kept|GET " + String(repeating: "x", count: 40) + "|")
    XCTAssertEqual(written, 45)
  }

  func testDecimalsAreWrittenExactlyAtTheirWidth() {
    for value in [0, 7, 10, 99, 100, 204, 65535, -1, -10, Int.max, Int.min] {
      var bytes: [UInt8] = []
      bytes.appendWriting(room: String(value).utf8.count) { $0.putDecimal(value) }
      XCTAssertEqual(String(decoding: bytes, as: UTF8.self), String(value))
    }
  }

  func testUnusedRoomAddsNothing() {
    var bytes: [UInt8] = [1, 2]
    bytes.appendWriting(room: 4096) { _ in }
    XCTAssertEqual(bytes, [1, 2])
    bytes.appendWriting(room: 1) { $0.put(3) }
    XCTAssertEqual(bytes, [1, 2, 3])
  }
}
