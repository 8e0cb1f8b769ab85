import Dispatch

/// The one timer of a background task (pin list updates, revocation
/// refreshes) on that task's own serial queue, off the event loops. The
/// Dispatch source is created and resumed together in `start` (a source
/// released while suspended crashes), never suspended, and cancelled with
/// its owner.
final class BackgroundTimer: @unchecked Sendable {
  let queue: DispatchQueue
  /// Set once, on `queue`.
  private var source: DispatchSourceTimer?

  init(label: String) { queue = DispatchQueue(label: label) }

  deinit { source?.cancel() }

  /// Arms the timer once: `tick` runs on `queue` after `delay` seconds and
  /// then every `interval` (nil: only when re-armed with `schedule`). The
  /// handler holds its owner weakly, so the owner's end cancels the timer.
  func start(after delay: Double, repeating interval: Double? = nil, _ tick: @escaping @Sendable () -> Void) {
    queue.sync {
      guard source == nil else { return }
      let timer = DispatchSource.makeTimerSource(queue: queue)
      timer.setEventHandler(handler: tick)
      if let interval {
        timer.schedule(deadline: .now() + delay, repeating: interval)
      } else {
        timer.schedule(deadline: .now() + delay)
      }
      timer.resume()
      source = timer
    }
  }

  /// Fires next after `delay` seconds (on `queue`).
  func schedule(after delay: Double) {
    dispatchPrecondition(condition: .onQueue(queue))
    source?.schedule(deadline: .now() + delay)
  }
}
