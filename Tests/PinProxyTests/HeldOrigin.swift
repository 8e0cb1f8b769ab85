import Foundation
import PinEventLoop
import PinTrust

/// A `ScriptedOrigin` that keeps its first `limit` requests unanswered until
/// `release()`, so that a test decides when an upstream slot frees or a
/// stream's response comes. Held requests are answered `late`, the others
/// `ok` at once: a client can tell which waited.
final class HeldOrigin: @unchecked Sendable {
  private struct Held {
    var holding = true
    var count = 0
    var connections: [Connection] = []
  }

  private let held = Locked(Held())
  private(set) var origin: ScriptedOrigin!
  /// `ScriptedOrigin`'s handlers hold their origin unowned: one freed while
  /// a proxy connection still sends to it (a failed test leaving a request
  /// in flight) would crash the whole test process. Kept until it exits.
  private static let kept = Locked<[ScriptedOrigin]>([])

  init(holdingFirst limit: Int = .max) throws {
    origin = try ScriptedOrigin { [held] connection, _, _ in
      let hold = held.withLock { state in
        guard state.holding && state.count < limit else { return false }
        state.count += 1
        state.connections.append(connection)
        return true
      }
      if !hold { connection.write(HeldOrigin.answer("ok")) }
    }
    HeldOrigin.kept.withLock { $0.append(origin) }
  }

  static func answer(_ body: String) -> [UInt8] {
    Array("HTTP/1.1 200 OK\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)".utf8)
  }

  var port: Int { origin.port }
  var requestCount: Int { origin.requestCount }
  /// Requests held and not answered yet.
  var heldCount: Int { held.withLock { $0.connections.count } }

  /// Answers every held request, and every later one at once.
  func release() {
    let waiting = held.withLock { state in
      state.holding = false
      defer { state.connections = [] }
      return state.connections
    }
    for connection in waiting { connection.loop.execute { connection.write(HeldOrigin.answer("late")) } }
  }

  func close() { origin.close() }
}
