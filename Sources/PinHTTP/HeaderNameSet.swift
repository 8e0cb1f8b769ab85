/// A fixed set of header names, kept as bytes, that a field name
/// is looked up in without building a string: the length is compared first,
/// so most names are rejected after one integer comparison.
struct HeaderNameSet: Sendable {
  private var names: [[UInt8]]

  init(_ names: [String]) {
    self.names = names.map { Array($0.utf8) }
  }

  /// Adds list tokens (as `HTTPHeaders.tokens` returns them).
  mutating func insert(contentsOf more: [String]) {
    names += more.map { Array($0.utf8) }
  }

  func contains(_ name: [UInt8]) -> Bool {
    names.contains { $0.count == name.count && ASCII.equalsIgnoringCase($0, name) }
  }

  func contains(_ name: String) -> Bool { contains(Array(name.utf8)) }
}
