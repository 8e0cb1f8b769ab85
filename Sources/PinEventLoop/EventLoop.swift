import Dispatch
import Foundation

/// One serial queue: everything a connection does happens on its loop.
public final class EventLoop: Sendable {
  public let queue: DispatchQueue
  public let name: String

  public init(name: String) {
    self.name = name
    queue = DispatchQueue(label: "pinproxy.loop.\(name)")
  }

  public func execute(_ work: @escaping @Sendable () -> Void) { queue.async(execute: work) }

  public func preconditionInLoop() { dispatchPrecondition(condition: .onQueue(queue)) }

  /// A one-shot timer on this loop. Cancel it when it is no longer wanted.
  public func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) -> LoopTimer {
    LoopTimer(queue: queue, seconds: seconds, work: work)
  }
}

/// A one-shot Dispatch timer. Cancelling is idempotent; a fired timer is done.
public final class LoopTimer: @unchecked Sendable {
  private let source: DispatchSourceTimer

  init(queue: DispatchQueue, seconds: Double, work: @escaping @Sendable () -> Void) {
    source = DispatchSource.makeTimerSource(queue: queue)
    source.schedule(deadline: .now() + seconds, leeway: .milliseconds(10))
    source.setEventHandler(handler: work)
    source.resume()
  }

  public func cancel() { source.cancel() }

  deinit { source.cancel() }
}

/// N loops (default: one per core); new connections are spread round-robin.
public final class EventLoopGroup: Sendable {
  public let loops: [EventLoop]
  private let counter = Counter()

  public init(count: Int = ProcessInfo.processInfo.activeProcessorCount) {
    loops = (0..<max(1, count)).map { EventLoop(name: "\($0)") }
  }

  public func next() -> EventLoop { loops[counter.increment() % loops.count] }
}

final class Counter: @unchecked Sendable {
  private let lock = NSLock()
  private var value = 0

  func increment() -> Int {
    lock.lock()
    defer { lock.unlock() }
    value &+= 1
    return value & Int.max
  }
}
