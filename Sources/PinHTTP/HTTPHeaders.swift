/// An ordered list of header fields as received, kept as bytes: a value is
/// forwarded exactly as it arrived (obs-text included, RFC 9110 §5.5), never
/// re-encoded. Names keep their spelling; lookups compare names as ASCII
/// bytes, case-insensitively (RFC 9110 §5.1), lengths first.
///
/// One storage, indices into it (as swift-nio's `HTTPHeaders`): a parsed
/// section is the head's bytes, copied once out of the read, and a table of
/// (name, value) ranges into them. No field has an array or a string of its
/// own, and copying a list copies two references, not one per field. Fields
/// added later append their bytes; removed ones leave the table only.
public struct HTTPHeaders: Sendable, Equatable, RandomAccessCollection {
  /// One field as a value of its own: handed out by the list (slices of its
  /// storage), or made to be added.
  public struct Field: Sendable, Equatable {
    /// The name's bytes: token characters only (the parser refuses others).
    public var nameBytes: ArraySlice<UInt8>
    /// The value's bytes without surrounding whitespace.
    public var valueSlice: ArraySlice<UInt8>

    public init(name: String, value: String) {
      nameBytes = Array(name.utf8)[...]
      valueSlice = Array(value.utf8)[...]
    }

    public init(nameBytes: [UInt8], valueBytes: [UInt8]) {
      self.nameBytes = nameBytes[...]
      self.valueSlice = valueBytes[...]
    }

    public init(nameBytes: ArraySlice<UInt8>, valueSlice: ArraySlice<UInt8>) {
      self.nameBytes = nameBytes
      self.valueSlice = valueSlice
    }

    /// The value as an array of its own (a copy).
    public var valueBytes: [UInt8] { Array(valueSlice) }

    public var name: String { String(decoding: nameBytes, as: UTF8.self) }
    /// The value as text; bytes that are not UTF-8 read as U+FFFD here only.
    public var value: String { String(decoding: valueSlice, as: UTF8.self) }
  }

  /// Where one field's name and value lie in `storage`, and which known
  /// field it is (`KnownField.rawValue`; `unknown` for any other name).
  struct Entry: Sendable {
    var name: Range<Int32>
    var value: Range<Int32>
    var known: UInt8
    static let unknown: UInt8 = 0xff
  }

  /// The bytes every entry points into: a parsed section's head, then the
  /// bytes of fields added since.
  private var storage: [UInt8] = []
  private var entries: [Entry] = []
  /// The known fields present (`KnownField.bit`): kept as fields are added
  /// and removed, so asking for an absent one reads no entry.
  private var present: UInt32 = 0

  public init(_ pairs: [(String, String)] = []) {
    for (name, value) in pairs { add(name, value) }
  }

  /// A parsed section: `storage` is the head its fields lie in, and the
  /// table is sized once for `capacity` fields.
  /// `table` is a recycled one, taken over (consumed, so that emptying it
  /// finds it unshared and keeps its storage).
  init(parsedFrom storage: [UInt8], capacity: Int, table: consuming [Entry] = []) {
    self.storage = storage
    entries = consume table
    entries.removeAll(keepingCapacity: true)
    entries.reserveCapacity(capacity)
  }

  /// Gives up the storage and the table, for a parser to reuse (`HTTP1Parser.recycle`).
  mutating func surrender() -> (storage: [UInt8], table: [Entry]) {
    defer { self = HTTPHeaders() }
    return (storage, entries)
  }

  /// A field the parser found at these ranges of the storage, recognised
  /// there as `known` (or not one).
  mutating func appendParsed(name: Range<Int>, value: Range<Int>, known: KnownField?) {
    entries.append(
      Entry(
        name: Int32(name.lowerBound)..<Int32(name.upperBound),
        value: Int32(value.lowerBound)..<Int32(value.upperBound), known: known?.rawValue ?? Entry.unknown))
    if let known { present |= known.bit }
  }

  /// Works `present` out again after entries were removed.
  private mutating func recountKnown() {
    present = 0
    for entry in entries where entry.known != Entry.unknown { present |= 1 &<< UInt32(entry.known) }
  }

  // MARK: Collection

  public var startIndex: Int { 0 }
  public var endIndex: Int { entries.count }
  public var count: Int { entries.count }

  public subscript(position: Int) -> Field {
    let entry = entries[position]
    return Field(nameBytes: storage[range(entry.name)], valueSlice: storage[range(entry.value)])
  }

  /// The bytes of every name and value together (to size a buffer).
  var byteCount: Int {
    entries.reduce(0) { $0 + $1.name.count + $1.value.count }
  }

  /// The fields as a list of values (for tests and diagnostics).
  public var fields: [Field] { Array(self) }

  private func range(_ range: Range<Int32>) -> Range<Int> { Int(range.lowerBound)..<Int(range.upperBound) }

  // MARK: Changes

  public mutating func add(_ name: String, _ value: String) { append(name: name.utf8, value: value.utf8) }
  public mutating func add(_ field: Field) { append(name: field.nameBytes, value: field.valueSlice) }

  private mutating func append(name: some Collection<UInt8>, value: some Collection<UInt8>) {
    let nameStart = storage.count
    storage += name
    let valueStart = storage.count
    storage += value
    let known = storage.withUnsafeBufferPointer {
      KnownField.recognize(UnsafeBufferPointer(rebasing: $0[nameStart..<valueStart]))
    }
    appendParsed(name: nameStart..<valueStart, value: valueStart..<storage.count, known: known)
  }

  /// Replaces every field of that name with one.
  public mutating func replace(_ name: String, _ value: String) {
    remove(name)
    add(name, value)
  }

  public mutating func remove(_ name: String) {
    storage.withUnsafeBufferPointer { bytes in
      entries.removeAll { Self.name(of: $0, in: bytes, is: name.utf8) }
    }
    recountKnown()
  }

  /// Keeps only the fields for which `keep` holds.
  public mutating func filter(_ keep: (Field) -> Bool) {
    let kept = indices.filter { keep(self[$0]) }
    guard kept.count < entries.count else { return }
    entries = kept.map { entries[$0] }
    recountKnown()
  }

  /// Keeps only the fields for which `keep` holds, given each field's known
  /// identity and its name in place.
  mutating func keepFields(_ keep: (_ known: UInt8, _ name: UnsafeBufferPointer<UInt8>) -> Bool) {
    let kept = storage.withUnsafeBufferPointer { bytes in
      entries.filter { keep($0.known, UnsafeBufferPointer(rebasing: bytes[range($0.name)])) }
    }
    guard kept.count < entries.count else { return }
    entries = kept
    recountKnown()
  }

  // MARK: Equality: the same fields in the same order, byte for byte

  public static func == (left: HTTPHeaders, right: HTTPHeaders) -> Bool {
    left.count == right.count
      && zip(left, right).allSatisfy {
        $0.nameBytes.elementsEqual($1.nameBytes) && $0.valueSlice.elementsEqual($1.valueSlice)
      }
  }

  // MARK: Lookups, on the bytes

  /// Whether the entry's name is `name`, ASCII case ignored: the length
  /// decides for most names.
  private static func name(
    of entry: Entry, in bytes: UnsafeBufferPointer<UInt8>, is name: some Collection<UInt8>
  )
    -> Bool
  {
    let start = Int(entry.name.lowerBound)
    let end = Int(entry.name.upperBound)
    guard end - start == name.count else { return false }
    let field = UnsafeBufferPointer(rebasing: bytes[start..<end])
    // A String's bytes in place (a small one's copied to the stack): the
    // compare is then a loop over two buffers, not over a UTF8View.
    return name.withContiguousStorageIfAvailable { ASCII.equalsIgnoringCase(field, $0) }
      ?? ASCII.equalsIgnoringCase(field, name)
  }

  /// Appends `name: value` CRLF for each field `keep` accepts, in order.
  /// A parsed line that already reads exactly so (`Name: value` CRLF, the
  /// usual spelling) is copied from the head as it is, and a run of such
  /// lines one after another as one span — the forwarded head is mostly a
  /// few copies of the received one (nginx's proxy module copies header
  /// lines the same way).
  func appendFields(
    to bytes: inout [UInt8], keeping keep: (_ known: UInt8, _ name: UnsafeBufferPointer<UInt8>) -> Bool
  ) {
    bytes.appendWriting(room: HTTPSerializer.fieldsSize(self)) { writeFields(to: &$0, keeping: keep) }
  }

  /// The same, through a writer with room for `HTTPSerializer.fieldsSize`.
  func writeFields(
    to writer: inout ByteWriter, keeping keep: (_ known: UInt8, _ name: UnsafeBufferPointer<UInt8>) -> Bool
  ) {
    storage.withUnsafeBufferPointer { stored in
      var run = 0..<0
      for entry in entries {
        let name = range(entry.name)
        let value = range(entry.value)
        let nameBytes = UnsafeBufferPointer(rebasing: stored[name])
        guard keep(entry.known, nameBytes) else { continue }
        let lineEnd = value.upperBound + 2
        let asWritten =
          value.lowerBound == name.upperBound + 2 && lineEnd <= stored.count
          && stored[name.upperBound] == 0x3a && stored[name.upperBound + 1] == 0x20
          && stored[value.upperBound] == 0x0d && stored[value.upperBound + 1] == 0x0a
        if asWritten && !run.isEmpty && run.upperBound == name.lowerBound {
          run = run.lowerBound..<lineEnd
          continue
        }
        writer.put(UnsafeBufferPointer(rebasing: stored[run]))
        run = 0..<0
        if asWritten {
          run = name.lowerBound..<lineEnd
        } else {
          writer.put(nameBytes)
          writer.put(": ")
          writer.put(UnsafeBufferPointer(rebasing: stored[value]))
          writer.put("\r\n")
        }
      }
      writer.put(UnsafeBufferPointer(rebasing: stored[run]))
    }
  }

  /// Whether a field of that known name is present: one bit read.
  @inline(__always)
  public func contains(_ field: KnownField) -> Bool { present & field.bit != 0 }

  /// Whether a field has this name, given in place.
  func contains(name: UnsafeBufferPointer<UInt8>) -> Bool {
    storage.withUnsafeBufferPointer { bytes in entries.contains { Self.name(of: $0, in: bytes, is: name) } }
  }

  /// The position of the first field of that known name at or after `start`.
  func index(of field: KnownField, from start: Int) -> Int? {
    guard contains(field) else { return nil }
    return entries[start...].firstIndex { $0.known == field.rawValue }
  }

  /// The position of the first field of that name at or after `start`.
  func index(named name: String, from start: Int) -> Int? {
    if let known = KnownField.recognize(name) { return index(of: known, from: start) }
    return storage.withUnsafeBufferPointer { bytes in
      entries[start...].firstIndex { Self.name(of: $0, in: bytes, is: name.utf8) }
    }
  }

  /// Calls `body` with the value of each field of that known name, in
  /// order, as bytes in place; stops when it returns false. Nothing is read
  /// when there is none (most heads, for most of these).
  func forEachValue(_ field: KnownField, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
    guard contains(field) else { return }
    storage.withUnsafeBufferPointer { bytes in
      for entry in entries where entry.known == field.rawValue {
        if !body(UnsafeBufferPointer(rebasing: bytes[range(entry.value)])) { return }
      }
    }
  }

  /// The same for any name: a known one is looked up by its identity.
  func forEachValue(_ name: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
    if let known = KnownField.recognize(name) { return forEachValue(known, body) }
    storage.withUnsafeBufferPointer { bytes in
      for entry in entries where Self.name(of: entry, in: bytes, is: name.utf8) {
        if !body(UnsafeBufferPointer(rebasing: bytes[range(entry.value)])) { return }
      }
    }
  }

  public func values(_ name: String) -> [String] {
    var result: [String] = []
    forEachValue(name) { value in
      result.append(String(decoding: value, as: UTF8.self))
      return true
    }
    return result
  }

  public func first(_ name: String) -> String? {
    var result: String?
    forEachValue(name) { value in
      result = String(decoding: value, as: UTF8.self)
      return false
    }
    return result
  }

  /// The first value of that name as the bytes received (no String made).
  public func firstValueBytes(_ name: String) -> [UInt8]? {
    var result: [UInt8]?
    forEachValue(name) { value in
      result = Array(value)
      return false
    }
    return result
  }

  public func contains(_ name: String) -> Bool {
    var found = false
    forEachValue(name) { _ in
      found = true
      return false
    }
    return found
  }

  /// How many field lines carry that name.
  public func count(of name: String) -> Int {
    var count = 0
    forEachValue(name) { _ in
      count += 1
      return true
    }
    return count
  }
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
    forEachValue(name) { Self.forEachElement(of: $0, body) }
  }

  /// The same for a known field.
  public func forEachToken(_ field: KnownField, _ body: (UnsafeBufferPointer<UInt8>) -> Void) {
    forEachValue(field) { Self.forEachElement(of: $0, body) }
  }

  /// Each comma-separated element of one value, trimmed; always true (go on).
  private static func forEachElement(
    of value: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Void
  ) -> Bool {
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
    return true
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

  /// The same for a known field (its absence read from one bit).
  public func containsToken(_ field: KnownField, _ token: StaticString) -> Bool {
    var found = false
    let token = UnsafeBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
    forEachToken(field) { element in
      if !found && ASCII.equalsIgnoringCase(element, token) { found = true }
    }
    return found
  }

  /// Whether the fields of that known name list exactly one element, and it
  /// is `token` (ASCII case ignored): `Transfer-Encoding: chunked`.
  public func hasOnlyToken(_ field: KnownField, _ token: StaticString) -> Bool {
    var (count, matches) = (0, false)
    let token = UnsafeBufferPointer(start: token.utf8Start, count: token.utf8CodeUnitCount)
    forEachToken(field) { element in
      count += 1
      matches = ASCII.equalsIgnoringCase(element, token)
    }
    return count == 1 && matches
  }
}

/// Byte helpers for ASCII protocol text.
enum ASCII {
  static func lower(_ byte: UInt8) -> UInt8 { (0x41...0x5a).contains(byte) ? byte | 0x20 : byte }
  /// Optional whitespace (RFC 9110 §5.6.3): space or horizontal tab.
  static func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

  /// Two buffers of bytes, equal but for the case of ASCII letters.
  static func equalsIgnoringCase(_ bytes: UnsafeBufferPointer<UInt8>, _ other: UnsafeBufferPointer<UInt8>)
    -> Bool
  {
    guard bytes.count == other.count else { return false }
    for index in 0..<bytes.count where bytes[index] != other[index] {
      guard lower(bytes[index]) == lower(other[index]) else { return false }
    }
    return true
  }

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
