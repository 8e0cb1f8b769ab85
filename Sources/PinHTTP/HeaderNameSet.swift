/// A fixed set of header names, kept as bytes, that a field name
/// is looked up in without building a string: the length is compared first,
/// so most names are rejected after one integer comparison.
struct HeaderNameSet: Sendable {
  private var names: [[UInt8]]

  init(_ names: [String]) {
    self.names = names.map { Array($0.utf8) }
  }

  func contains(_ name: some Collection<UInt8>) -> Bool {
    names.contains { $0.count == name.count && ASCII.equalsIgnoringCase($0, name) }
  }

  /// Adds one name, given as received (compared without case anyway).
  mutating func insert(_ name: UnsafeBufferPointer<UInt8>) { names.append(Array(name)) }

  func contains(_ name: String) -> Bool { contains(name.utf8) }
}
