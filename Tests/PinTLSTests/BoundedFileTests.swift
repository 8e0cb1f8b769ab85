import Foundation
import PinTLS
import XCTest

#if canImport(Glibc)
  import Glibc
#endif

/// `BoundedFile.read`: the bound judged by what was read, the buffer grown
/// past what fstat said, and only regular files read.
final class BoundedFileTests: XCTestCase {
  private var directory: URL!

  override func setUpWithError() throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("bounded-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  }

  override func tearDown() {
    try? FileManager.default.removeItem(at: directory)
  }

  private func file(_ bytes: [UInt8]) throws -> String {
    let path = directory.appendingPathComponent(UUID().uuidString).path
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
  }

  func testAFileMuchLargerThanTheFirstBufferIsReadByteForByte() throws {
    let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
    XCTAssertEqual(try BoundedFile.read(try file(bytes), limit: 1 << 20), bytes)
  }

  func testTheLimitIsInclusiveAndOneByteMoreIsTooLarge() throws {
    let bytes = [UInt8](repeating: 0x41, count: 10_000)
    XCTAssertEqual(try BoundedFile.read(try file(bytes), limit: 10_000).count, 10_000)
    XCTAssertThrowsError(try BoundedFile.read(try file(bytes), limit: 9_999)) { error in
      XCTAssertEqual(error as? BoundedFile.Failure, .tooLarge(limit: 9_999))
    }
  }

  func testAnEmptyFileIsEmpty() throws {
    XCTAssertEqual(try BoundedFile.read(try file([]), limit: 64), [])
  }

  /// /proc files report size 0 and still have content: read to the end.
  func testAFileThatSaysSizeZeroIsReadToItsEnd() throws {
    let status = try BoundedFile.read("/proc/self/status", limit: 1 << 20)
    XCTAssertTrue(String(decoding: status, as: UTF8.self).contains("Pid:"))
  }

  func testAFIFOAndAMissingFileAreRefusedAtOnce() throws {
    let fifo = directory.appendingPathComponent("fifo").path
    XCTAssertEqual(mkfifo(fifo, 0o600), 0)
    XCTAssertThrowsError(try BoundedFile.read(fifo, limit: 64)) { error in
      XCTAssertEqual(error as? BoundedFile.Failure, .notARegularFile(kind: "a FIFO"))
    }
    XCTAssertThrowsError(try BoundedFile.read(directory.appendingPathComponent("none").path, limit: 64)) {
      error in
      XCTAssertEqual(error as? BoundedFile.Failure, .unreadable(reason: "no such file"))
    }
  }
}
