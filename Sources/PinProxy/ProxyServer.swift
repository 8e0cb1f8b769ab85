import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// The running proxy: one `Listener` per configured listener, sessions spread
/// over the loops, and the shared context.
public final class ProxyServer: Sendable {
  let context: ProxyContext
  public let group: EventLoopGroup
  private let listeners: [(ListenerConfig, Listener)]

  public struct StartError: Error, CustomStringConvertible {
    public let description: String
  }

  /// Binds every listener; a bind failure is an error naming the listener.
  public init(snapshot: RuntimeSnapshot, logger: ProxyLogger = ProxyLogger()) throws(StartError) {
    SignalHandling.ignoreSIGPIPE()
    let count = snapshot.configuration.eventLoops
    group = count > 0 ? EventLoopGroup(count: count) : EventLoopGroup()
    context = ProxyContext(snapshot: snapshot, group: group, logger: logger)
    var bound: [(ListenerConfig, Listener)] = []
    for config in snapshot.configuration.listeners {
      guard
        let address = SocketAddress(
          ip: config.address.host == "localhost" ? "127.0.0.1" : config.address.host,
          port: config.address.port)
      else {
        bound.forEach { $0.1.close() }
        throw StartError(description: "listener \(config.name): \(config.address.host) is not an IP address")
      }
      let context = self.context
      do {
        let listener = try Listener(address: address, group: group) { fd, peer, loop in
          ProxyServer.accept(fd: fd, peer: peer, loop: loop, config: config, context: context)
        }
        bound.append((config, listener))
      } catch {
        bound.forEach { $0.1.close() }
        throw StartError(description: "listener \(config.name) on \(config.address): \(error.description)")
      }
    }
    listeners = bound
  }

  /// The addresses actually bound (port 0 in the config picks a free one).
  public var boundAddresses: [(name: String, address: String)] {
    listeners.map { ($0.0.name, $0.1.address.description) }
  }

  public func stop() { listeners.forEach { $0.1.close() } }

  static func accept(fd: Int32, peer: String, loop: EventLoop, config: ListenerConfig, context: ProxyContext)
  {
    let connection = Connection(fd: fd, peer: peer, loop: loop)
    let limit = context.snapshot.limits.maxConnections
    if context.openConnections.add(1, ordering: .relaxed).newValue > limit {
      context.openConnections.subtract(1, ordering: .relaxed)
      context.logger.log(.warning, "connection-limit", ["client": peer, "limit": String(limit)])
      let failure = ProxyFailure(
        status: 503, code: .upstreamUnreachable, reason: "connection limit \(limit) reached")
      connection.write(config.mode == .forward ? failure.response() : [])
      connection.closeAfterFlush()
      return
    }
    switch config.mode {
    case .forward:
      ForwardSession(connection: connection, context: context, listener: config).start()
    case .tunnel:
      guard let upstream = config.upstream else { return connection.close() }
      TunnelSession(connection: connection, context: context, listener: config, target: upstream).start()
    }
  }
}
