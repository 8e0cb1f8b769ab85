/// A FIFO queue over one growable buffer: appending and popping are O(1)
/// and, once the buffer has grown to the session's working size, allocate
/// nothing (an Array drained with `removeFirst()` shifts every element).
/// Unbounded by itself: what goes in is bounded by the producer (the
/// parser stops at one message; the state machine emits a handful of actions per event).
struct RingBuffer<Element> {
  private var storage: [Element?] = []
  private var head = 0
  private(set) var count = 0
  /// The size of the first buffer, made at the first append (an empty
  /// queue allocates nothing: one handed back for reuse, or never used).
  private let initialCapacity: Int

  init(capacity: Int = 8) { initialCapacity = max(1, capacity) }

  var isEmpty: Bool { count == 0 }
  var first: Element? { count == 0 ? nil : storage[head] }

  /// Consumed: the element moves into its slot (no reference count change).
  mutating func append(_ element: consuming Element) {
    if count == storage.count { grow() }
    storage[(head + count) % storage.count] = element
    count += 1
  }

  /// Puts an element back in front: the one just popped, when it cannot be
  /// handled yet (moved out and back, never copied).
  mutating func prepend(_ element: consuming Element) {
    if count == storage.count { grow() }
    head = (head + storage.count - 1) % storage.count
    storage[head] = element
    count += 1
  }

  mutating func append(contentsOf elements: some Sequence<Element>) {
    for element in elements { append(element) }
  }

  mutating func popFirst() -> Element? {
    guard count > 0 else { return nil }
    // Moved out of its slot, not copied and released: one reference count
    // change less per element, on a queue every action passes through.
    let element = storage[head].take()
    head = (head + 1) % storage.count
    count -= 1
    return element
  }

  mutating func removeAll() {
    while popFirst() != nil {}
    head = 0
  }

  private mutating func grow() {
    var larger: [Element?] = Array(repeating: nil, count: max(storage.count * 2, initialCapacity))
    for index in 0..<count { larger[index] = storage[(head + index) % storage.count] }
    storage = larger
    head = 0
  }
}
