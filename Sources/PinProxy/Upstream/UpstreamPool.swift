import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// Idle upstream connections of one loop, used only on that loop (`loop.queue`). Each idle
/// connection has a timer; one that closes or sends anything while idle is
/// dropped.
final class UpstreamPool: UpstreamDelegate, @unchecked Sendable {
  let loop: EventLoop
  private var idle: [UpstreamKey: [(UpstreamConnection, LoopTimer)]] = [:]
  /// The idle count across all loops' pools, for /metrics.
  private let idleGauge: SharedCount
  /// Whether a key's pin list version is still the one in force.
  private let pins: DynamicPinRegistry
  /// This loop's shared HTTP/2 connections.
  let http2: HTTP2UpstreamPool
  /// The policy generation in force: a connection verified under an older
  /// one (a dial that finished after a reload) is never kept for reuse.
  private var generation: UInt64 = 0

  init(loop: EventLoop, idleGauge: SharedCount, pins: DynamicPinRegistry) {
    self.loop = loop
    self.idleGauge = idleGauge
    self.pins = pins
    http2 = HTTP2UpstreamPool(loop: loop)
  }

  func hasIdle(_ key: UpstreamKey) -> Bool { idle[key] != nil }

  /// Closes the idle connection that waited longest, to make room under the
  /// upstream socket limit; false when none is idle.
  func closeOneIdle() -> Bool {
    loop.preconditionInLoop()
    guard let (key, list) = idle.first, let (connection, timer) = list.first else { return false }
    timer.cancel()
    idleGauge.add(-1)
    idle[key] = list.count > 1 ? Array(list.dropFirst()) : nil
    connection.close()
    return true
  }

  func take(_ key: UpstreamKey) -> UpstreamConnection? {
    loop.preconditionInLoop()
    while var list = idle[key], let (connection, timer) = list.popLast() {
      idle[key] = list.isEmpty ? nil : list
      timer.cancel()
      idleGauge.add(-1)
      if connection.isReusable && connection.hasNoUnreadInput {
        connection.markReused()
        return connection
      }
      connection.close()
    }
    return nil
  }

  /// Keeps a connection for reuse, or closes it when the pool for its key is
  /// full, or when it was verified under a pin list that has since been replaced.
  func put(_ connection: UpstreamConnection, idleTimeout: Double, maxIdle: Int) {
    loop.preconditionInLoop()
    guard connection.isReusable, (idle[connection.key]?.count ?? 0) < maxIdle,
      connection.key.policy.generation >= generation, pins.isCurrent(connection.key.policy.pinList)
    else {
      return connection.close()
    }
    connection.delegate = self
    // Read while idle (the session may have paused it for back-pressure):
    // anything an idle connection sends ends its use.
    connection.resumeReading()
    let timer = loop.schedule(after: idleTimeout) { [weak self, weak connection] in
      guard let self, let connection else { return }
      self.remove(connection)
      connection.close()
    }
    idle[connection.key, default: []].append((connection, timer))
    idleGauge.add(1)
  }

  /// Closes idle connections whose policy generation is not `generation`,
  /// or whose pin list was replaced.
  func retire(keeping generation: UInt64) {
    loop.preconditionInLoop()
    self.generation = max(self.generation, generation)
    http2.retire(keeping: generation) { [pins] in pins.isCurrent($0.policy.pinList) }
    for (key, list) in idle where key.policy.generation != generation || !pins.isCurrent(key.policy.pinList) {
      for (connection, timer) in list {
        timer.cancel()
        connection.close()
        idleGauge.add(-1)
      }
      idle[key] = nil
    }
  }

  private func remove(_ connection: UpstreamConnection) {
    guard var list = idle[connection.key], list.contains(where: { $0.0 === connection }) else { return }
    idleGauge.add(-1)
    list.removeAll { entry in
      if entry.0 === connection { entry.1.cancel() }
      return entry.0 === connection
    }
    idle[connection.key] = list.isEmpty ? nil : list
  }

  /// The idle connection that `link` is. The pool is the delegate of its
  /// idle connections only, so a call from anything else finds none.
  private func idleConnection(_ link: any UpstreamLink) -> UpstreamConnection? {
    idle[link.key]?.first { $0.0 === link }?.0
  }

  // An idle connection must stay silent; anything from it ends its use.
  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.Event]) {
    loop.preconditionInLoop()
    guard let connection = idleConnection(upstream) else { return upstream.close() }
    drop(connection)
  }
  func upstreamDidDrain(_ upstream: any UpstreamLink) {}
  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    loop.preconditionInLoop()
    if let connection = idleConnection(upstream) { remove(connection) }
  }

  private func drop(_ upstream: UpstreamConnection) {
    remove(upstream)
    upstream.close()
  }
}
