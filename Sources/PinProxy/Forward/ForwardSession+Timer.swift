import PinEventLoop

/// A forward session's one timer (`ForwardSession.timer`), armed for the
/// earliest deadline its machine keeps (`ForwardMachine.nextDeadline`): the
/// idle or header wait while a request is awaited, the current exchange's
/// response deadline while it waits for its response head. The machines
/// own the deadlines; the session only follows them.
extension ForwardSession {
  /// The timer's work (given in `init`): the machine answers whichever
  /// deadline has passed; after the run the timer follows what is left.
  func timerFired() {
    armedDeadline = nil
    run { [loop] in $0.timeout(now: loop.now) }
  }

  /// After each run: arms the timer for the machine's earliest deadline,
  /// or cancels it when there is none. Only a change touches the timer
  /// (a keep-alive request moves it twice: to the response deadline and
  /// back to the idle wait).
  func followDeadline() {
    let next = machine.nextDeadline?.at
    guard next != armedDeadline else { return }
    armedDeadline = next
    if let next { timer.schedule(at: next) } else { timer.cancel() }
  }

  /// The session serves no more requests: its timer is cancelled for good,
  /// and lets go of it.
  func stopTimers() {
    timer.invalidate()
  }
}
