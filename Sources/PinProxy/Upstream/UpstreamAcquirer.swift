import PinEventLoop
import PinHTTP

/// How an exchange gets its upstream: an idle HTTP/1.1 connection from the
/// pool, a stream on an open HTTP/2 connection, the dial already under way
/// for the same key, or a new dial whose ALPN answer decides the protocol.
/// Used by both client sides (HTTP/1.1 sessions and HTTP/2 streams).
///
/// Runs on its loop; `completion` is called there, once. The caller must
/// close a link it can no longer use.
///
/// A class: a session keeps one per snapshot and asks it for every
/// request, passing one reference rather than copying nine fields.
final class UpstreamAcquirer {
  let pool: UpstreamPool
  let dialer: UpstreamDialer
  let loop: EventLoop
  let limits: HTTPLimits
  let metrics: ProxyMetrics
  let idleTimeout: Double
  /// Upstream sockets per client address and in all.
  let budget: UpstreamBudget
  /// The admission key of the client the exchanges are for.
  let client: BudgetClient
  /// The client connection asking (`UpstreamBudget.connectionID`): its
  /// first socket is never refused for its address's cap. Set again when
  /// the loop's next connection of the same client takes this acquirer
  /// over (`ForwardStorageShelf.acquirerMemo`).
  var connection: UInt64
  /// The idle list last found for a target (`idleList(for:)`). On the loop only.
  private var lastList: (target: ForwardTarget, list: UpstreamPool.IdleList)?

  init(
    pool: UpstreamPool, dialer: UpstreamDialer, loop: EventLoop, limits: HTTPLimits, metrics: ProxyMetrics,
    idleTimeout: Double, budget: UpstreamBudget, client: String, connection: UInt64
  ) {
    (self.pool, self.dialer, self.loop, self.limits, self.metrics) = (pool, dialer, loop, limits, metrics)
    (self.idleTimeout, self.budget, self.connection) = (idleTimeout, budget, connection)
    self.client = BudgetClient(client)
  }

  typealias Completion = (Result<(link: any UpstreamLink, pooled: Bool), ProxyFailure>) -> Void

  /// `bodyFollows`: the request has a body, which could not be sent again
  /// were a pooled connection found closed (see `UpstreamPool.take`).
  func acquire(
    _ target: ForwardTarget, poolAllowed: Bool, bodyFollows: Bool = true, _ completion: @escaping Completion
  ) {
    loop.preconditionInLoop()
    let key = target.key
    if poolAllowed {
      switch takePooled(target, bodyFollows: bodyFollows) {
      case .taken(let connection): return completion(.success((connection, true)))
      case .refused: return completion(.failure(refusal))
      case .noneIdle: break
      }
    }
    let http2 = pool.http2
    let offersHTTP2 = target.route.offersHTTP2 && key.tls
    if offersHTTP2 && http2.mayOfferHTTP2(key) {
      if let stream = http2.stream(for: key) { return completion(.success((stream, stream.reusedFromPool))) }
      let waiting = http2.join(key) { outcome in
        switch outcome {
        case .stream(let stream): completion(.success((stream, false)))
        case .acquireAgain:
          self.acquire(target, poolAllowed: poolAllowed, bodyFollows: bodyFollows, completion)
        case .failed(let failure): completion(.failure(failure))
        }
      }
      if waiting { return }
      return dial(target, http2: true, coalescing: http2.beginDial(key), completion)
    }
    dial(target, http2: offersHTTP2, coalescing: false, completion)
  }

  /// What the pool's step of `acquire` answered. A few words, not a
  /// `Result` holding a failure: the keep-alive path asks it for every
  /// request, and a failure is made only when there is one (`refusal`).
  enum PoolAnswer {
    /// An idle HTTP/1.1 connection, this client's while it serves it.
    case taken(UpstreamConnection)
    /// The client's budget refused another connection: answer `refusal`.
    case refused
    /// None is idle for the key: dial.
    case noneIdle
  }

  /// The pool's step of `acquire`, answered at once and without a closure
  /// (the keep-alive path takes it for every request).
  func takePooled(_ target: ForwardTarget, bodyFollows: Bool) -> PoolAnswer {
    loop.preconditionInLoop()
    let (budget, client, connection) = (self.budget, self.client, self.connection)
    switch pool.take(
      from: idleList(for: target), bodyFollows: bodyFollows,
      admit: { budget.chargeClient(client, connection: connection) })
    {
    case .connection(let pooled):
      pooled.charge?.assign(to: client, connection: connection)
      return .taken(pooled)
    case .refused:
      return .refused
    case .none(let admitted):
      if admitted { budget.releaseClient(client, connection: connection) }
      return .noneIdle
    }
  }

  /// The pool's idle list for the target's key: the one remembered for the
  /// same target (a keep-alive client's router hands out one object per
  /// host and path) while the pool still has it, else looked up.
  private func idleList(for target: ForwardTarget) -> UpstreamPool.IdleList? {
    if let lastList, lastList.target === target, !lastList.list.dropped { return lastList.list }
    let list = pool.idleList(for: target.key)
    lastList = list.map { (target, $0) }
    return list
  }

  /// Why this client gets no more upstream connections (its budget is spent).
  var refusal: ProxyFailure { budget.refusal(client: client) }

  /// `coalescing`: this dial is the one other requests for the key joined,
  /// and tells the HTTP/2 pool how it ended.
  private func dial(
    _ target: ForwardTarget, http2: Bool, coalescing: Bool, _ completion: @escaping Completion
  ) {
    let key = target.key
    // A socket of its own for this client; at the total limit an idle
    // pooled connection of this loop makes room first.
    var charge = budget.chargeSocket(client: client, connection: connection)
    if charge == nil, budget.openSockets >= budget.socketLimit, self.pool.closeOneIdle() {
      charge = budget.chargeSocket(client: client, connection: connection)
    }
    guard let charge else {
      let failure = budget.refusal(client: client)
      if coalescing { self.pool.http2.dialed(key, .failure(failure)) }
      return completion(.failure(failure))
    }
    let (pool, limits, metrics, idleTimeout) = (self.pool.http2, self.limits, self.metrics, self.idleTimeout)
    dialer.open(key, route: target.route, on: loop, http2: http2) { result in
      let dialed: DialedUpstream
      switch result {
      case .failure(let failure):
        charge.releaseAll()
        if coalescing { pool.dialed(key, .failure(failure)) }
        return completion(.failure(failure))
      case .success(let success):
        dialed = success
      }
      switch dialed.negotiated {
      case .http2:
        // The origin chose h2: speaking HTTP/1.1 on it is never a fallback.
        // Shared by every client's streams: the socket counts in the total only.
        charge.releaseClient()
        guard
          let connection = try? HTTP2UpstreamConnection(
            key: key, dialed: dialed, limits: limits, metrics: metrics)
        else {
          charge.releaseAll()
          dialed.close()
          let failure = ProxyFailure.unreachable("cannot start HTTP/2 with \(key)")
          if coalescing { pool.dialed(key, .failure(failure)) }
          return completion(.failure(failure))
        }
        connection.charge = charge
        pool.add(connection, idleTimeout: idleTimeout)
        // A new connection allows streams until the origin's SETTINGS say otherwise.
        guard let stream = connection.reserveStream() else {
          let failure = ProxyFailure.unreachable("\(key) allows no HTTP/2 stream")
          connection.close()
          if coalescing { pool.dialed(key, .failure(failure)) }
          return completion(.failure(failure))
        }
        if coalescing { pool.dialed(key, .success(connection)) }
        completion(.success((stream, false)))
      case .http1:
        metrics.upstreamConnections.increment([WireProtocol.http1.rawValue])
        if coalescing { pool.dialed(key, .success(nil)) }
        completion(
          .success((UpstreamConnection(key: key, dialed: dialed, limits: limits, charge: charge), false)))
      }
    }
  }
}
