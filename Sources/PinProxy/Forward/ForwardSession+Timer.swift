import PinEventLoop

/// A forward session's one timer (`ForwardSession.timer`): the head timer
/// (idle or header) while a request is awaited, the current exchange's
/// response deadline (`ExchangeMachine.responseDeadline`, machine state)
/// while it waits for its response head.
extension ForwardSession {
  /// What the timer waits for. The two never run together, so one timer
  /// object serves both (two per connection were two allocations and two
  /// timers to let go of). Cancelling one leaves the other armed.
  enum TimerPurpose {
    case none
    case head(seconds: Double)
    case response
  }

  /// The timer's work (given in `init`): what it waited for, answered once.
  func timerFired() {
    let purpose = timerPurpose
    timerPurpose = .none
    switch purpose {
    case .none:
      break
    case .head(let seconds):
      run { $0.headTimerFired(after: seconds) }
    case .response:
      // Followed again after the run: a deadline not yet passed (or moved)
      // is armed afresh.
      armedResponseDeadline = nil
      run { [loop] in $0.responseDeadlineReached(now: loop.now) }
    }
  }

  func armHeadTimer(seconds: Double) {
    timerPurpose = .head(seconds: seconds)
    timer.schedule(after: seconds)
  }

  func cancelHeadTimer() {
    guard case .head = timerPurpose else { return }
    timerPurpose = .none
    timer.cancel()
  }

  /// After each run: the timer follows the current exchange's response
  /// deadline as the machine left it (set when the request went upstream,
  /// gone with the response head, a refusal or the exchange's end). Only a
  /// change touches the timer; a head timer armed in the run is left alone.
  func followResponseDeadline() {
    let deadline = machine.responseDeadline
    guard deadline != armedResponseDeadline else { return }
    armedResponseDeadline = deadline
    if let deadline {
      timerPurpose = .response
      timer.schedule(at: deadline.at)
    } else if case .response = timerPurpose {
      timerPurpose = .none
      timer.cancel()
    }
  }

  /// The session serves no more requests: its timer is cancelled for good,
  /// and lets go of it.
  func stopTimers() {
    timer.invalidate()
  }
}
