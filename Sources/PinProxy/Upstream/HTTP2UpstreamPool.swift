import PinEventLoop

/// The HTTP/2 upstream connections of one loop, shared by all its client
/// sessions: one per key (host, port, policy generation) carries every
/// concurrent exchange up to the origin's stream limit, then a second is
/// opened. While a key's first connection is being dialled, other requests
/// for it wait for that dial instead of each opening their own.
///
/// Confined to its loop (`loop.queue`).
final class HTTP2UpstreamPool: @unchecked Sendable {
  /// What a request waiting for a dial gets.
  enum Outcome {
    case stream(HTTP2UpstreamStream)
    /// The origin chose HTTP/1.1 (or the connection had no room): acquire
    /// the ordinary way.
    case acquireAgain
    case failed(ProxyFailure)
  }

  let loop: EventLoop
  private var connections: [UpstreamKey: [HTTP2UpstreamConnection]] = [:]
  private var waiting: [UpstreamKey: [(Outcome) -> Void]] = [:]
  /// Keys whose origin answered ALPN with HTTP/1.1: not waited for again.
  private var http1Keys: Set<UpstreamKey> = []
  static let maxRememberedHTTP1Keys = 4096
  /// Requests that may wait for one dial; past this they dial themselves.
  static let maxWaiting = 1024
  var idleTimeout = 60.0
  /// An idle connection is PINGed this often; one PING unanswered by the
  /// next tick closes it, well before the idle timeout would.
  var pingInterval: Double { max(0.5, min(idleTimeout / 4, 30)) }

  init(loop: EventLoop) { self.loop = loop }

  /// The open connections for `key` (what the pool would hand streams from).
  func connections(for key: UpstreamKey) -> [HTTP2UpstreamConnection] {
    loop.preconditionInLoop()
    return connections[key] ?? []
  }

  /// Open connections per key and the streams they carry.
  func census() -> [PoolCensus] {
    loop.preconditionInLoop()
    return connections.compactMap { key, list in
      list.isEmpty
        ? nil
        : PoolCensus(
          key: key.description, protocolName: WireProtocol.http2.rawValue, connections: list.count,
          streamsInFlight: list.reduce(0) { $0 + $1.activeStreams })
    }
  }

  /// Whether a request for `key` should try HTTP/2 first.
  func mayOfferHTTP2(_ key: UpstreamKey) -> Bool { !http1Keys.contains(key) }

  /// A stream on an open connection for `key` with room for it.
  func stream(for key: UpstreamKey) -> HTTP2UpstreamStream? {
    loop.preconditionInLoop()
    for connection in connections[key] ?? [] {
      if let stream = connection.reserveStream() { return stream }
    }
    return nil
  }

  /// Waits for the dial in progress for `key`: true when there is one
  /// (`outcome` will be called), false when the caller should dial.
  func join(_ key: UpstreamKey, _ outcome: @escaping (Outcome) -> Void) -> Bool {
    loop.preconditionInLoop()
    guard let count = waiting[key]?.count, count < Self.maxWaiting else { return false }
    waiting[key]?.append(outcome)
    return true
  }

  /// The caller dials `key`; later requests join it until `dialed`. False
  /// when another dial is already the one joined (its waiting list was
  /// full): the caller's dial is then its own.
  func beginDial(_ key: UpstreamKey) -> Bool {
    loop.preconditionInLoop()
    guard waiting[key] == nil else { return false }
    waiting[key] = []
    return true
  }

  /// The dial for `key` ended: with an HTTP/2 connection (added, and its
  /// streams handed to the waiting requests), HTTP/1.1 (`nil`), or a failure.
  func dialed(_ key: UpstreamKey, _ result: Result<HTTP2UpstreamConnection?, ProxyFailure>) {
    loop.preconditionInLoop()
    let waiters = waiting.removeValue(forKey: key) ?? []
    switch result {
    case .success(let connection?):
      for waiter in waiters {
        if let stream = connection.reserveStream() { waiter(.stream(stream)) } else { waiter(.acquireAgain) }
      }
    case .success(nil):
      if http1Keys.count >= Self.maxRememberedHTTP1Keys { http1Keys.removeAll() }
      http1Keys.insert(key)
      for waiter in waiters { waiter(.acquireAgain) }
    case .failure(let failure):
      for waiter in waiters { waiter(.failed(failure)) }
    }
  }

  /// Keeps a new h2 connection for the streams to come; its key is known to
  /// speak h2 from now on (an origin that moved from HTTP/1.1).
  func add(_ connection: HTTP2UpstreamConnection, idleTimeout: Double) {
    loop.preconditionInLoop()
    http1Keys.remove(connection.key)
    self.idleTimeout = idleTimeout
    connection.pool = self
    connections[connection.key, default: []].append(connection)
  }

  func remove(_ connection: HTTP2UpstreamConnection) {
    guard var list = connections[connection.key] else { return }
    list.removeAll { $0 === connection }
    connections[connection.key] = list.isEmpty ? nil : list
  }

  /// Retires connections of another configuration generation: they finish
  /// their streams and close.
  func retire(keeping generation: UInt64, isCurrent: (UpstreamKey) -> Bool) {
    loop.preconditionInLoop()
    for (key, list) in connections where key.policy.generation != generation || !isCurrent(key) {
      for connection in list { connection.retire() }
    }
  }
}
