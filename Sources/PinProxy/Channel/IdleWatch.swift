import Dispatch
import PinEventLoop

/// Closes a splice that has been silent both ways for `limit` seconds.
/// Activity only records a time (no timer per byte): the one timer, when it
/// fires, re-arms itself for the time that remains. Confined to its loop
/// (`loop.queue`): touched, read and cancelled only there.
final class IdleWatch: @unchecked Sendable {
  let loop: EventLoop
  let limit: Double
  private(set) var lastActivity = DispatchTime.now().uptimeNanoseconds
  private var timer: LoopTimer?
  private let onIdle: () -> Void

  init(loop: EventLoop, limit: Double, onIdle: @escaping () -> Void) {
    self.loop = loop
    self.limit = limit
    self.onIdle = onIdle
    arm(after: limit)
  }

  func touch() {
    loop.preconditionInLoop()
    lastActivity = DispatchTime.now().uptimeNanoseconds
  }

  /// Seconds since the last byte either way.
  var idleSeconds: Double {
    loop.preconditionInLoop()
    return Double(DispatchTime.now().uptimeNanoseconds &- lastActivity) / 1e9
  }

  func cancel() {
    loop.preconditionInLoop()
    timer?.cancel()
    timer = nil
  }

  private func arm(after seconds: Double) {
    timer = loop.schedule(after: seconds) { [weak self] in
      guard let self, self.timer != nil else { return }
      let idle = self.idleSeconds
      if idle >= self.limit { return self.onIdle() }
      self.arm(after: self.limit - idle)
    }
  }
}
