import Foundation
import XCTest

@testable import PinProxy

/// The `/proc` scan behind `client_program`: a real child process holding
/// a socket is found by the socket's inode, with its executable's name and
/// pid; an inode nobody holds is not found; a user that does not own the
/// process does not see it (the owner filter).
final class LocalProgramsTests: XCTestCase {
  func testAChildHoldingASocketIsFoundByItsInode() throws {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    child.arguments = [
      "-c",
      """
      import os, socket, sys, time
      l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
      c = socket.create_connection(l.getsockname())
      print(os.fstat(c.fileno()).st_ino, flush=True)
      sys.stdin.read()
      """,
    ]
    let output = Pipe()
    let input = Pipe()
    child.standardOutput = output
    child.standardInput = input
    try child.run()
    defer {
      try? input.fileHandleForWriting.close()
      child.waitUntilExit()
    }
    let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
    let inode = try XCTUnwrap(UInt32(line.trimmingCharacters(in: .whitespacesAndNewlines)), line)
    let found = LocalPrograms.processes(holding: [inode, 1], ownedBy: [getuid()])
    XCTAssertEqual(found[inode]?.pid, child.processIdentifier)
    XCTAssertTrue(found[inode]?.program.hasPrefix("python3") ?? false, "\(found)")
    XCTAssertNil(found[1])
    // Read first as a recent process, without listing /proc.
    let recent = LocalPrograms.processes(
      holding: [inode], ownedBy: [getuid()], recent: [child.processIdentifier], walkAll: false)
    XCTAssertEqual(recent[inode]?.pid, child.processIdentifier)
    XCTAssertTrue(LocalPrograms.processes(holding: [inode], ownedBy: [getuid() &+ 1]).isEmpty)
  }

  /// The link text of a descriptor, read as bytes: only `socket:[DIGITS]`
  /// within UInt32 is a socket's inode.
  func testSocketLinksAreReadStrictly() {
    XCTAssertEqual(LocalPrograms.socketInode("socket:[12345]"), 12345)
    XCTAssertEqual(LocalPrograms.socketInode("socket:[4294967295]"), UInt32.max)
    for text in [
      "socket:[4294967296]", "socket:[]", "socket:[12a]", "socket:[1", "pipe:[1]", "socket:[-1]",
      "anon_inode:[eventfd]", "/dev/null", "socket:[99999999999]",
    ] {
      XCTAssertNil(LocalPrograms.socketInode(text), text)
    }
  }
}
