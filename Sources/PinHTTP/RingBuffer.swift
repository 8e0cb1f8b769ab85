/// A FIFO queue over one growable buffer: appending and popping are O(1)
/// and, once the buffer has grown to the session's working size, allocate
/// nothing (an Array drained with `removeFirst()` shifts every element).
/// Unbounded by itself: what goes in is bounded by the producer (the
/// parser stops at one message; the state machine emits a handful of actions per event).
///
/// Public and inlinable: the client side's parser appends its events to a
/// machine's queue of them directly (`HTTP1Parser.feed(_:into:)`), and the
/// machines of PinProxy queue their actions in it, each specialised for
/// its element.
public struct RingBuffer<Element> {
  @usableFromInline var storage: [Element?] = []
  @usableFromInline var head = 0
  @usableFromInline var stored = 0
  /// The size of the first buffer, made at the first append (an empty
  /// queue allocates nothing: one handed back for reuse, or never used).
  @usableFromInline let initialCapacity: Int

  @inlinable
  public init(capacity: Int = 8) { initialCapacity = max(1, capacity) }

  @inlinable public var count: Int { stored }
  @inlinable public var isEmpty: Bool { stored == 0 }
  @inlinable public var first: Element? { stored == 0 ? nil : storage[head] }

  /// Consumed: the element moves into its slot (no reference count change).
  @inlinable
  public mutating func append(_ element: consuming Element) {
    if stored == storage.count { grow() }
    storage[(head + stored) % storage.count] = element
    stored += 1
  }

  /// Puts an element back in front: the one just popped, when it cannot be
  /// handled yet (moved out and back, never copied).
  @inlinable
  public mutating func prepend(_ element: consuming Element) {
    if stored == storage.count { grow() }
    head = (head + storage.count - 1) % storage.count
    storage[head] = element
    stored += 1
  }

  @inlinable
  public mutating func append(contentsOf elements: some Sequence<Element>) {
    for element in elements { append(element) }
  }

  @inlinable
  public mutating func popFirst() -> Element? {
    guard stored > 0 else { return nil }
    let slot = head
    head = (head + 1) % storage.count
    stored -= 1
    // Moved out of its slot, which is left nil: no copy and no release.
    // (`storage[slot].take()` copied the element out through the array's
    // subscript and then released the original when it set the slot nil:
    // a retain and a release of everything an event or action holds, on a
    // queue every event and action passes through.)
    return storage.withUnsafeMutableBufferPointer { slots in
      let element = (slots.baseAddress! + slot).move()
      (slots.baseAddress! + slot).initialize(to: nil)
      return element
    }
  }

  /// Drops the `count` newest elements (what a failed step appended).
  @inlinable
  public mutating func removeLast(_ count: Int) {
    for _ in 0..<min(count, stored) {
      storage[(head + stored - 1) % storage.count] = nil
      stored -= 1
    }
  }

  @inlinable
  public mutating func removeAll() {
    while popFirst() != nil {}
    head = 0
  }

  @usableFromInline
  mutating func grow() {
    var larger: [Element?] = Array(repeating: nil, count: max(storage.count * 2, initialCapacity))
    for index in 0..<stored { larger[index] = storage[(head + index) % storage.count] }
    storage = larger
    head = 0
  }
}
