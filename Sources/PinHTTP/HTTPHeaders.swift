/// An ordered list of header fields as received, kept as bytes: a value is
/// forwarded exactly as it arrived (obs-text included, RFC 9110 §5.5), never
/// re-encoded. Names keep their spelling; lookups compare names as ASCII
/// bytes, case-insensitively (RFC 9110 §5.1).
public struct HTTPHeaders: Sendable, Equatable, Sequence {
  public struct Field: Sendable, Equatable {
    /// The name's bytes: token characters only (the parser refuses others).
    public var nameBytes: [UInt8]
    /// The value's bytes without surrounding whitespace. A parsed value is a
    /// slice of the head it arrived in: one buffer for a whole head, not an
    /// array per field.
    public var valueSlice: ArraySlice<UInt8>

    public init(name: String, value: String) {
      nameBytes = CommonHeaderNames.shared(name.utf8)
      valueSlice = Array(value.utf8)[...]
    }

    public init(nameBytes: [UInt8], valueBytes: [UInt8]) {
      self.nameBytes = nameBytes
      self.valueSlice = valueBytes[...]
    }

    public init(nameBytes: [UInt8], valueSlice: ArraySlice<UInt8>) {
      self.nameBytes = nameBytes
      self.valueSlice = valueSlice
    }

    /// The value as an array of its own (a copy when it is a slice).
    public var valueBytes: [UInt8] { Array(valueSlice) }

    public var name: String { String(decoding: nameBytes, as: UTF8.self) }
    /// The value as text; bytes that are not UTF-8 read as U+FFFD here only.
    public var value: String { String(decoding: valueSlice, as: UTF8.self) }

    /// Lengths first: a lookup runs over every field of a head, and most
    /// names differ in length from the one sought.
    func hasName(_ other: String) -> Bool {
      nameBytes.count == other.utf8.count && ASCII.equalsIgnoringCase(nameBytes, other.utf8)
    }
  }

  public private(set) var fields: [Field] = []

  public init(_ pairs: [(String, String)] = []) {
    fields = pairs.map { Field(name: $0.0, value: $0.1) }
  }

  public var count: Int { fields.count }
  public mutating func reserveCapacity(_ count: Int) { fields.reserveCapacity(count) }
  public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

  public mutating func add(_ name: String, _ value: String) { fields.append(Field(name: name, value: value)) }
  public mutating func add(_ field: Field) { fields.append(field) }

  /// Replaces every field of that name with one.
  public mutating func replace(_ name: String, _ value: String) {
    remove(name)
    add(name, value)
  }

  public mutating func remove(_ name: String) {
    fields.removeAll { $0.hasName(name) }
  }

  /// Keeps only the fields for which `keep` holds.
  public mutating func filter(_ keep: (Field) -> Bool) { fields.removeAll { !keep($0) } }

  public func values(_ name: String) -> [String] {
    fields.filter { $0.hasName(name) }.map(\.value)
  }

  public func first(_ name: String) -> String? {
    fields.first { $0.hasName(name) }?.value
  }

  /// The first value of that name as the bytes received (no String made).
  public func firstValueBytes(_ name: String) -> [UInt8]? {
    fields.first { $0.hasName(name) }?.valueBytes
  }

  public func contains(_ name: String) -> Bool { fields.contains { $0.hasName(name) } }

  /// How many field lines carry that name.
  public func count(of name: String) -> Int { fields.reduce(0) { $0 + ($1.hasName(name) ? 1 : 0) } }

  /// Comma-separated list elements of every field of that name, trimmed and
  /// lower-cased. Worked out on the bytes: this runs for several fields of
  /// every message, and most messages have none of them.
  public func tokens(_ name: String) -> [String] {
    var result: [String] = []
    forEachToken(name) { token in
      result.append(
        String(unsafeUninitializedCapacity: token.count) { text in
          for index in token.indices { text[index] = ASCII.lower(token[index]) }
          return token.count
        })
    }
    return result
  }

  /// Calls `body` with each comma-separated list element of every field of
  /// that name, trimmed, as received (not lower-cased): nothing is allocated.
  public func forEachToken(_ name: String, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
    for field in fields where field.hasName(name) {
      field.valueSlice.withUnsafeBufferPointer { value in
        var start = 0
        while start <= value.count {
          var end = start
          while end < value.count && value[end] != UInt8(ascii: ",") { end += 1 }
          var low = start
          var high = end
          while low < high && ASCII.isBlank(value[low]) { low += 1 }
          while high > low && ASCII.isBlank(value[high - 1]) { high -= 1 }
          if low < high { body(UnsafeBufferPointer(rebasing: value[low..<high])) }
          start = end + 1
        }
      }
    }
  }

  /// Whether a list element of a field of that name is `token` (ASCII case
  /// ignored), without allocating.
  public func containsToken(_ name: String, _ token: String) -> Bool {
    var found = false
    forEachToken(name) { element in
      if !found && ASCII.equalsIgnoringCase(element, token.utf8) { found = true }
    }
    return found
  }
}

/// Byte helpers for ASCII protocol text.
enum ASCII {
  static func lower(_ byte: UInt8) -> UInt8 { (0x41...0x5a).contains(byte) ? byte | 0x20 : byte }
  /// Optional whitespace (RFC 9110 §5.6.3): space or horizontal tab.
  static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

  static func equalsIgnoringCase<Bytes: Collection<UInt8>, S: Sequence<UInt8>>(_ bytes: Bytes, _ other: S)
    -> Bool
  {
    var index = bytes.startIndex
    for byte in other {
      guard index < bytes.endIndex, lower(bytes[index]) == lower(byte) else { return false }
      index = bytes.index(after: index)
    }
    return index == bytes.endIndex
  }
}

extension String {
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
