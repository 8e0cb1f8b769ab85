/// An ordered list of header fields as received. Names keep their spelling;
/// lookups are case-insensitive (RFC 9110 §5.1).
public struct HTTPHeaders: Sendable, Equatable, Sequence {
  public struct Field: Sendable, Equatable {
    public var name: String
    public var value: String
  }

  public private(set) var fields: [Field] = []

  public init(_ pairs: [(String, String)] = []) {
    fields = pairs.map { Field(name: $0.0, value: $0.1) }
  }

  public var count: Int { fields.count }
  public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

  public mutating func add(_ name: String, _ value: String) { fields.append(Field(name: name, value: value)) }

  /// Replaces every field of that name with one.
  public mutating func replace(_ name: String, _ value: String) {
    remove(name)
    add(name, value)
  }

  public mutating func remove(_ name: String) {
    fields.removeAll { $0.name.caseInsensitiveEquals(name) }
  }

  public func values(_ name: String) -> [String] {
    fields.filter { $0.name.caseInsensitiveEquals(name) }.map(\.value)
  }

  public func first(_ name: String) -> String? {
    fields.first { $0.name.caseInsensitiveEquals(name) }?.value
  }

  public func contains(_ name: String) -> Bool { fields.contains { $0.name.caseInsensitiveEquals(name) } }

  /// Comma-separated list elements of every field of that name, trimmed and lower-cased.
  public func tokens(_ name: String) -> [String] {
    values(name).flatMap { $0.split(separator: ",") }.map {
      $0.trimmingCharacters(in: " \t").lowercased()
    }.filter { !$0.isEmpty }
  }
}

extension String {
  func caseInsensitiveEquals(_ other: String) -> Bool {
    utf8.count == other.utf8.count && lowercased() == other.lowercased()
  }

  func trimmingCharacters(in set: String) -> String {
    let characters = Set(set)
    var slice = Substring(self)
    while let first = slice.first, characters.contains(first) { slice = slice.dropFirst() }
    while let last = slice.last, characters.contains(last) { slice = slice.dropLast() }
    return String(slice)
  }
}

extension Substring {
  func trimmingCharacters(in set: String) -> String { String(self).trimmingCharacters(in: set) }
}
