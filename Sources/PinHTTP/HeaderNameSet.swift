/// A fixed set of header names, kept as lower-case bytes, that a field name
/// is looked up in without building a string: the length is compared first,
/// so most names are rejected after one integer comparison.
struct HeaderNameSet: Sendable {
  private var names: [[UInt8]]

  init(_ names: [String]) {
    self.names = names.map { Array($0.lowercased().utf8) }
  }

  /// Adds list tokens (already lower-cased, as `HTTPHeaders.tokens` returns them).
  mutating func insert(contentsOf more: [String]) {
    names += more.map { Array($0.utf8) }
  }

  func contains(_ name: [UInt8]) -> Bool {
    for candidate in names where candidate.count == name.count {
      var equal = true
      for index in 0..<name.count where ASCII.lower(name[index]) != candidate[index] {
        equal = false
        break
      }
      if equal { return true }
    }
    return false
  }

  func contains(_ name: String) -> Bool { contains(Array(name.utf8)) }
}
