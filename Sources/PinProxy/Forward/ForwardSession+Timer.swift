import PinEventLoop

/// A forward session's one timer (`ForwardSession.timer`): the head timer
/// (idle or header) while a request is awaited, the response timer while
/// an exchange waits for its response head.
extension ForwardSession {
  /// What the timer waits for. The two never run together, so one timer
  /// object serves both (two per connection were two allocations and two
  /// timers to let go of). Cancelling one leaves the other armed.
  enum TimerPurpose {
    case none
    case head(seconds: Double)
    case response(exchange: Int)
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
    case .response(let exchange):
      let seconds = snapshot.timeouts.upstreamResponse
      run { $0.responseTimerFired(exchange: exchange, after: seconds) }
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

  // MARK: ExchangeHost (the current exchange's response timer)

  func armResponseTimer() {
    timerPurpose = .response(exchange: machine.inExchange { $0.exchange.id } ?? 0)
    timer.schedule(after: snapshot.timeouts.upstreamResponse)
  }

  func cancelResponseTimer() {
    guard case .response = timerPurpose else { return }
    timerPurpose = .none
    timer.cancel()
  }

  /// The session serves no more requests: its timer is cancelled for good,
  /// and lets go of it.
  func stopTimers() {
    timer.invalidate()
  }
}
