import XCTest

@testable import PinHTTP

/// The queue every machine's actions and events pass through: held to an
/// array doing the same operations, across growth, wrap-around and copies
/// (a copy shares the buffer until one side changes), and every element
/// it took is released exactly once.
final class RingBufferTests: XCTestCase {
  /// Counts the tokens alive, so a leaked or doubly released element shows.
  final class Token {
    static let alive = Counter()
    let value: Int
    init(_ value: Int) {
      self.value = value
      Token.alive.add(1)
    }
    deinit { Token.alive.add(-1) }
  }

  final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add(_ delta: Int) { lock.withLock { count += delta } }
    var value: Int { lock.withLock { count } }
  }

  func testTwentyThousandRandomStepsAgreeWithAnArrayAndReleaseEveryElementOnce() {
    let before = Token.alive.value
    do {
      var generator = SplitMix(seed: 57)
      var queue = RingBuffer<Token>(capacity: 2)
      var model: [Int] = []
      // A copy taken now and then must keep what it held whatever the
      // original does afterwards.
      var copies: [(RingBuffer<Token>, [Int])] = []
      var next = 0
      for _ in 0..<20_000 {
        switch generator.next() % 8 {
        case 0, 1, 2:
          queue.append(Token(next))
          model.append(next)
          next += 1
        case 3, 4:
          let popped = queue.popFirst()
          XCTAssertEqual(popped?.value, model.first)
          if !model.isEmpty { model.removeFirst() }
          // Sometimes it cannot be handled yet and goes back in front.
          if let popped, generator.next() % 3 == 0 {
            queue.prepend(popped)
            model.insert(popped.value, at: 0)
          }
        case 5:
          let dropped = Int(generator.next() % 3)
          queue.removeLast(dropped)
          model.removeLast(min(dropped, model.count))
        case 6:
          if copies.count < 4 { copies.append((queue, model)) } else { copies.removeFirst() }
        default:
          if generator.next() % 50 == 0 {
            queue.removeAll()
            model.removeAll()
          }
        }
        XCTAssertEqual(queue.count, model.count)
        XCTAssertEqual(queue.isEmpty, model.isEmpty)
        XCTAssertEqual(queue.first?.value, model.first)
      }
      for (copy, held) in copies { XCTAssertEqual(drain(copy), held) }
      XCTAssertEqual(drain(queue), model)
    }
    XCTAssertEqual(Token.alive.value, before, "every element taken is released once, none early")
  }

  func testACopyKeepsItsElementsWhenTheOriginalGrowsAndWrapsAround() {
    var queue = RingBuffer<Int>(capacity: 4)
    for value in 0..<3 { queue.append(value) }
    _ = queue.popFirst()
    let copy = queue
    for value in 3..<20 { queue.append(value) }
    XCTAssertEqual(drain(copy), [1, 2])
    XCTAssertEqual(drain(queue), Array(1..<20))
  }

  func testAnEmptyQueueAllocatesNothingUntilTheFirstAppend() {
    var queue = RingBuffer<Int>()
    XCTAssertEqual(queue.storage.capacity, 0)
    XCTAssertNil(queue.popFirst())
    queue.removeLast(3)
    queue.removeAll()
    XCTAssertEqual(queue.storage.capacity, 0)
    queue.append(1)
    XCTAssertEqual(queue.storage.count, 8)
  }

  private func drain(_ queue: RingBuffer<Token>) -> [Int] {
    var queue = queue
    var values: [Int] = []
    while let element = queue.popFirst() { values.append(element.value) }
    return values
  }

  private func drain(_ queue: RingBuffer<Int>) -> [Int] {
    var queue = queue
    var values: [Int] = []
    while let element = queue.popFirst() { values.append(element) }
    return values
  }

  /// A fixed sequence, so that a failure is the same every run.
  struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
      state &+= 0x9E37_79B9_7F4A_7C15
      var z = state
      z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
      z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
      return z ^ (z >> 31)
    }
  }
}
