/// A cursor over room already made at the end of a byte array (the spare
/// capacity `Array.append(addingCapacity:initializingWith:)` hands out): a
/// head is written piece by piece with one bounds check and one copy each,
/// instead of an array append per piece, each checking uniqueness and
/// capacity and updating the count (nginx writes its proxied heads the same
/// way, into a buffer sized first).
///
/// The room is a bound the caller computes from the same parts it writes;
/// writing past it is a programming error and stops the process rather
/// than write out of bounds.
public struct ByteWriter: ~Copyable {
  private let base: UnsafeMutablePointer<UInt8>
  private let capacity: Int
  /// Bytes written so far.
  public private(set) var count = 0

  init(base: UnsafeMutablePointer<UInt8>, capacity: Int) {
    (self.base, self.capacity) = (base, capacity)
  }

  @inline(__always)
  public mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
    guard let start = bytes.baseAddress, bytes.count > 0 else { return }
    precondition(bytes.count <= capacity - count, "ByteWriter: past the room made for it")
    (base + count).update(from: start, count: bytes.count)
    count += bytes.count
  }

  @inline(__always)
  public mutating func put(_ byte: UInt8) {
    precondition(count < capacity, "ByteWriter: past the room made for it")
    base[count] = byte
    count += 1
  }

  /// A literal's bytes, from where the compiler put them.
  @inline(__always)
  public mutating func put(_ text: StaticString) {
    put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
  }

  /// A string's UTF-8 in place (a small one's from the stack). Read where
  /// it lies when it is contiguous (every native string): a mutable copy
  /// for `withUTF8` cost a retain and a release of its storage per call.
  @inline(__always)
  public mutating func put(_ text: String) {
    let done: Void? = text.utf8.withContiguousStorageIfAvailable { put($0) }
    if done == nil {
      var text = text
      text.withUTF8 { put($0) }
    }
  }

  /// A number's decimal digits, counted first and then written from the
  /// right straight into the room: no String, nothing reversed or moved.
  public mutating func putDecimal(_ value: Int) {
    var digits = 1
    var rest = value.magnitude
    while rest >= 10 {
      rest /= 10
      digits += 1
    }
    let width = digits + (value < 0 ? 1 : 0)
    precondition(width <= capacity - count, "ByteWriter: past the room made for it")
    if value < 0 { base[count] = 0x2d }
    var at = count + width
    rest = value.magnitude
    repeat {
      at -= 1
      base[at] = 0x30 + UInt8(truncatingIfNeeded: rest % 10)
      rest /= 10
    } while rest > 0
    count += width
  }
}

extension Array where Element == UInt8 {
  /// Appends what `body` writes, at most `room` bytes, into room made once.
  public mutating func appendWriting<Result>(room: Int, _ body: (inout ByteWriter) -> Result) -> Result {
    var result: Result?
    append(addingCapacity: room) { span in
      span.withUnsafeMutableBufferPointer { buffer, initialized in
        var writer = ByteWriter(base: buffer.baseAddress! + initialized, capacity: buffer.count - initialized)
        result = body(&writer)
        initialized += writer.count
      }
    }
    return result!
  }
}
