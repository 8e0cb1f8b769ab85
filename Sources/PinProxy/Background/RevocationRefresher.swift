import Foundation
import PinEventLoop
import PinTLS

/// Fetches CRLs and OCSP answers again before their nextUpdate, so that a
/// handshake seldom waits for one: each is due in the last tenth of its
/// validity, and at least `lead` before it ends. A refresh that fails or
/// does not verify keeps what is held (`FetchedRevocation.store`).
///
/// Off the event loops: the schedule runs on its own serial queue; the
/// fetches' socket work runs on a loop, as non-blocking I/O.
final class RevocationRefresher: @unchecked Sendable {
  static let interval: TimeInterval = 60
  static let lead: TimeInterval = 300

  private let timer = BackgroundTimer(label: "pinproxy.revocation-refresh")
  private let loop: EventLoop
  private let makeDialer: @Sendable () -> UpstreamDialer

  init(loop: EventLoop, makeDialer: @escaping @Sendable () -> UpstreamDialer) {
    self.loop = loop
    self.makeDialer = makeDialer
  }

  func start() {
    timer.start(after: Self.interval, repeating: Self.interval) { [weak self] in self?.tick() }
  }

  private func tick() {
    dispatchPrecondition(condition: .onQueue(timer.queue))
    let dialer = makeDialer()
    let state = dialer.snapshot.revocation
    let due = state.fetched.due(at: Date(), lead: Self.lead)
    guard !due.isEmpty else { return }
    loop.execute { [loop] in RevocationFetcher().fetch(due, dialer: dialer, on: loop) {} }
  }
}
