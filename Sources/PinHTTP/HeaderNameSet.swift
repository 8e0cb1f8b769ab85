/// A fixed set of header names, kept as bytes, that a field name
/// is looked up in without building a string: the length is compared first,
/// so most names are rejected after one integer comparison.
struct HeaderNameSet: Sendable {
  private var names: [[UInt8]]
  /// Bit `n` set when a name of `n` bytes is in the set (bit 63: one of 63
  /// or more). Most fields of a head have a length no name here has, and
  /// are passed by one test instead of a compare with every name.
  private var lengths: UInt64 = 0

  init(_ names: [String]) {
    self.names = []
    for name in names { insert(name.utf8) }
  }

  func contains(_ name: some Collection<UInt8>) -> Bool {
    let count = name.count
    guard lengths & Self.bit(count) != 0 else { return false }
    return names.contains { $0.count == count && ASCII.equalsIgnoringCase($0, name) }
  }

  /// The same for a name in place (a field of a parsed head).
  func contains(_ name: UnsafeBufferPointer<UInt8>) -> Bool {
    guard lengths & Self.bit(name.count) != 0 else { return false }
    return names.contains { candidate in
      candidate.count == name.count
        && candidate.withUnsafeBufferPointer { ASCII.equalsIgnoringCase($0, name) }
    }
  }

  /// Adds one name, given as received (compared without case anyway).
  mutating func insert(_ name: UnsafeBufferPointer<UInt8>) { insert(name[...]) }

  private mutating func insert(_ name: some Collection<UInt8>) {
    names.append(Array(name))
    lengths |= Self.bit(name.count)
  }

  func contains(_ name: String) -> Bool { contains(name.utf8) }

  private static func bit(_ length: Int) -> UInt64 { 1 << UInt64(min(length, 63)) }
}
