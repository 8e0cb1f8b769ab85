import Dispatch

/// `dispatchPrecondition(condition: .onQueue(queue))` in debug builds,
/// nothing in release: the data path's confinement checks (see
/// `EventLoop.preconditionInLoop`). Background tasks, which run a few times
/// a minute, keep `dispatchPrecondition` itself.
@inline(__always)
public func assertOnQueue(_ queue: DispatchQueue) {
  #if DEBUG
    dispatchPrecondition(condition: .onQueue(queue))
  #endif
}
