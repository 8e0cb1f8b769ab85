import Dispatch
import PinTrust

/// Logs connections refused for their address at most once per client
/// (its admission key) and listener per minute, and at most
/// `maximumLinesPerMinute` lines a minute in all: a scan or a misconfigured
/// device would otherwise write a line per connection. Every refusal is
/// counted by the caller all the same.
final class RefusedClientLog: Sendable {
  private struct State {
    var lastLogged: [String: UInt64] = [:]
    var minuteStarted: UInt64 = 0
    var linesThisMinute = 0
  }
  private let state = Locked(State())
  static let interval: UInt64 = 60_000_000_000
  static let maximumClients = 4096
  static let maximumLinesPerMinute = 100

  /// Whether this refusal of `client` on `listener` should be logged now.
  func shouldLog(listener: String, client: String, now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Bool
  {
    let key = listener + " " + client
    return state.withLock { state in
      if let last = state.lastLogged[key], now &- last < RefusedClientLog.interval { return false }
      if state.minuteStarted == 0 || now &- state.minuteStarted >= RefusedClientLog.interval {
        (state.minuteStarted, state.linesThisMinute) = (now, 0)
      }
      guard state.linesThisMinute < RefusedClientLog.maximumLinesPerMinute else { return false }
      if state.lastLogged.count >= RefusedClientLog.maximumClients {
        state.lastLogged = state.lastLogged.filter { now &- $0.value < RefusedClientLog.interval }
        if state.lastLogged.count >= RefusedClientLog.maximumClients { return false }
      }
      state.lastLogged[key] = now
      state.linesThisMinute += 1
      return true
    }
  }
}
