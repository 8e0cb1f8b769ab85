import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust
import Synchronization

/// The running proxy: one `Listener` per configured listener, sessions spread
/// over the loops, and the shared context.
public final class ProxyServer: Sendable {
  let context: ProxyContext
  public let group: EventLoopGroup
  private let listeners: [(ListenerConfig, Listener)]
  private let admin: AdminServer?

  public struct StartError: Error, CustomStringConvertible {
    public let description: String
  }

  /// Binds every listener; a bind failure is an error naming the listener.
  public init(snapshot: RuntimeSnapshot, logger: ProxyLogger = ProxyLogger()) throws(StartError) {
    SignalHandling.ignoreSIGPIPE()
    let count = snapshot.configuration.eventLoops
    group = EventLoopGroup(count: count > 0 ? count : EventLoopGroup.automaticCount())
    context = ProxyContext(snapshot: snapshot, group: group, logger: logger)
    var bound: [(ListenerConfig, Listener)] = []
    for config in snapshot.configuration.listeners {
      guard
        let address = SocketAddress(
          ip: config.address.listeningIP,
          port: config.address.port)
      else {
        bound.forEach { $0.1.close() }
        throw StartError(description: "listener \(config.name): \(config.address.host) is not an IP address")
      }
      let context = self.context
      let shared = BoundListener(config)
      // A listener on one address and port accepts there only: its
      // connections' own end is known without a getsockname each (a
      // wildcard's, or a port the kernel picks, is asked for).
      let here = address.port != 0 && address.addressBytes.contains { $0 != 0 } ? address : nil
      do {
        let listener = try Listener(
          address: address, group: group, onExhausted: ProxyServer.exhaustionLogger(logger, config.name)
        ) { fd, peer, loop in
          // `accept` judges the address first, under the snapshot it reads once.
          ProxyServer.accept(fd: fd, peer: peer, here: here, loop: loop, listener: shared, context: context)
        }
        bound.append((config, listener))
      } catch {
        bound.forEach { $0.1.close() }
        throw StartError(description: "listener \(config.name) on \(config.address): \(error.description)")
      }
    }
    listeners = bound
    let group = self.group
    let context = self.context
    do {
      admin = try snapshot.configuration.admin.map { config throws(StartError) in
        try AdminServer(address: config.address, group: group, context: context)
      }
    } catch {
      bound.forEach { $0.1.close() }
      throw error
    }
    context.background.start()
  }

  /// The admin listener's address, when one is configured.
  public var adminAddress: String? { admin?.listener.address.description }

  /// The addresses actually bound (port 0 in the config picks a free one).
  public var boundAddresses: [(name: String, address: String)] {
    listeners.map { ($0.0.name, $0.1.address.description) }
  }

  /// Stops accepting proxy connections. The admin listener stays up, so
  /// /healthz can say "draining" until the process exits.
  public func stop() { listeners.forEach { $0.1.close() } }

  public var generation: UInt64 { context.snapshot.generation }

  /// What `POST /reload` on the admin listener runs: `handler` reloads and
  /// answers with the outcome once the new configuration is in force.
  public func onReloadRequest(
    _ handler: @escaping @Sendable (@escaping @Sendable (ReloadOutcome) -> Void) -> Void
  ) {
    context.reloadRequester.withLock { $0 = handler }
  }
  public var isDraining: Bool { context.isDraining }
  public var openConnections: Int { context.admission.open.load(ordering: .relaxed) }

  /// Reads and compiles `file` off the event loops and, if every part of it
  /// is good, swaps it in atomically for new connections (open ones keep the
  /// snapshot they started with). Any error leaves the running configuration
  /// untouched and is returned with its file, line and key. Listener
  /// addresses and modes are bound at start and only change with a restart.
  public func reload(file: String, logger: ProxyLogger) -> Result<UInt64, ConfigErrors> {
    reloadReporting(file: file, logger: logger).map(\.generation)
  }

  /// The reload and what it warned of (each warning is logged as well).
  public func reloadReporting(file: String, logger: ProxyLogger) -> Result<
    (generation: UInt64, warnings: [String]), ConfigErrors
  > {
    let running = context.snapshot
    let configuration: Configuration
    let next: RuntimeSnapshot
    do {
      configuration = try ConfigurationParser.load(file: file)
      let ca: LocalCA?
      do {
        ca = try ProxyBootstrap.localCA(
          for: configuration, logger: logger, reloading: true,
          running: running.interception.values.first?.ca)
      } catch {
        return .failure(
          ConfigErrors(errors: [
            ConfigError(file: file, line: 0, column: 0, key: "localCA", message: error.description)
          ]))
      }
      next = try RuntimeSnapshot.compile(
        configuration, generation: running.generation + 1, ca: ca, pins: running.pins,
        authState: running.authState, revocation: running.revocation,
        warn: ProxyBootstrap.storeWarning(logger))
    } catch {
      context.metrics.reloads.increment(["failed"])
      context.metrics.lastReloadSucceeded.store(false, ordering: .relaxed)
      context.recordReload(
        ReloadRecord(
          time: Date(), result: "failed", generation: running.generation,
          error: error.errors.prefix(5).map(\.description).joined(separator: "\n")))
      return .failure(error)
    }
    context.metrics.reloads.increment(["ok"])
    context.metrics.lastReloadSucceeded.store(true, ordering: .relaxed)
    var warnings: [String] = []
    let before = running.configuration.listeners.map { "\($0.name) \($0.address) \($0.mode)" }
    let after = configuration.listeners.map { "\($0.name) \($0.address) \($0.mode)" }
    if before != after {
      let note = "listener addresses and modes change only with a restart; the listeners were left unchanged"
      logger.log(.warning, "reload-listeners-unchanged", ["note": note])
      warnings.append(note)
    }
    context.install(next)
    warnings += ProxyBootstrap.warnAboutPinExpiry(configuration, logger: logger)
    warnings += ProxyBootstrap.warnAboutWaivedPins(next, logger: logger)
    var record = ReloadRecord(time: Date(), result: "ok", generation: next.generation, error: nil)
    record.warnings = warnings
    context.recordReload(record)
    return .success((next.generation, warnings))
  }

  /// Graceful shutdown: stop accepting, close idle connections, let exchanges
  /// in flight finish until `deadline` seconds, then call `completion` (off the loops).
  /// `stopped` runs once the listeners are closed and idle connections are
  /// being closed, before any waiting.
  public func drain(
    deadline: Double, stopped: () -> Void = {}, completion: @escaping @Sendable (_ remaining: Int) -> Void
  ) {
    stop()
    context.beginDraining()
    stopped()
    let end = Date().addingTimeInterval(deadline)
    let context = self.context
    @Sendable func poll() {
      let open = context.admission.open.load(ordering: .relaxed)
      if open <= 0 || Date() >= end { return completion(max(0, open)) }
      DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { poll() }
    }
    DispatchQueue.global().async { poll() }
  }

  /// Logs that a listener stopped accepting for lack of descriptors, at
  /// most once a second per listener (it backs off ten times a second).
  static func exhaustionLogger(_ logger: ProxyLogger, _ listener: String) -> @Sendable (String) -> Void {
    let last = Atomic<Int>(0)
    return { reason in
      let now = Int(DispatchTime.now().uptimeNanoseconds / 1_000_000_000)
      guard last.exchange(now, ordering: .relaxed) != now else { return }
      logger.log(
        .error, "accept-paused",
        ["listener": listener, "reason": reason, "note": "out of file descriptors; retrying in 100 ms"])
    }
  }

  /// A connection the listener admitted by address. A client on this host
  /// is known by its socket's owner first: a user `allowedUsers` does not
  /// list is closed here, before a byte is read; the rest are counted under
  /// their key (address, and user for local peers) and served.
  /// `here`: the socket's own address, when the listener's says it.
  static func accept(
    fd: Int32, peer address: SocketAddress, here: SocketAddress? = nil, loop: EventLoop,
    listener: BoundListener,
    context: ProxyContext
  ) {
    let config = listener.config
    // Read once (a lock): every decision of this accept, and the session's
    // first, is made under it.
    let snapshot = context.snapshot
    let access = listener.access(under: snapshot)
    // The address first, before anything is read, under the snapshot in
    // force (a reload governs the next accept): a refused socket closes at
    // once, counted, and logged once a minute per client.
    guard context.admits(address, listener: config.name, rules: access.allowedClients) else {
      _ = Glibc.close(fd)
      return
    }
    // The address's bytes, inline, read once for the owner's look-up and the origin.
    let bytes = address.ipBytes
    let local = context.localPeer(fd: fd, peer: address, peerBytes: bytes, here: here, loop: loop)
    if let local, !context.admitsUser(local, fd: fd, peer: address, listener: config.name, access: access) {
      return
    }
    let loopState = context.loopState(for: loop)
    let origin = ClientOrigin(address: address, bytes: bytes, local: local, keys: &loopState.clientKeys)
    let limits = snapshot.limits
    let registry = loopState.registry
    let (decision, entry) = context.admission.admit(
      client: origin.key, remembered: loopState.lastClientCount, limits: limits
    ) {
      registry.evictOne(client: $0)
    }
    guard decision == .admitted, let entry else {
      let reason: String
      switch decision {
      case .clientLimit(let limit): reason = "connection limit per client address \(limit) reached"
      case .processLimit(let limit): reason = "connection limit \(limit) reached"
      case .admitted: reason = ""
      }
      var fields = ["client": origin.peer, "reason": reason]
      origin.addFields(to: &fields)
      context.logger.log(.warning, "connection-limit", fields: fields)
      let connection = Connection(fd: fd, address: address, loop: loop)
      let failure = ProxyFailure(status: 503, code: .upstreamUnreachable, reason: reason)
      connection.write(config.mode == .forward ? failure.response() : [])
      // The client has likely sent its request already: closing with it
      // unread would reset the connection and destroy the 503. A few
      // seconds of lingering, for a bounded number of such connections.
      let admission = context.admission
      guard config.mode == .forward, admission.beginRefusedLingering() else {
        return connection.closeAfterFlush()
      }
      connection.onClose = admission.endRefusedLingering
      LingeringClose.start(
        connection, owner: nil, timeout: min(2, snapshot.timeouts.lingeringClose), byteLimit: 1 << 20)
      return
    }
    loopState.lastClientCount = entry
    // The counts follow the socket (`Connection.onClose`): released the
    // moment it closes, not when the session's clean-up runs later. A
    // forward session keeps its ticket for the connections it serves next
    // (`serve`).
    func counted() -> (Connection, AdmissionTicket) {
      let ticket = AdmissionTicket(
        admission: context.admission, entry: entry, listenerOpen: context.metrics.connections(of: config.name)
      )
      let connection = Connection(fd: fd, address: address, loop: loop)
      connection.onClose = ticket.release
      return (connection, ticket)
    }
    switch config.mode {
    case .forward:
      ForwardSession.serve(
        fd: fd, peer: address, loop: loop, context: context, listener: listener, admitted: entry,
        origin: consume origin, snapshot: snapshot
      ).start()
    case .socks5:
      let (connection, ticket) = counted()
      SocksSession(
        connection: connection, context: context, listener: listener, admission: ticket, origin: origin
      )
      .start()
    case .tunnel:
      let (connection, _) = counted()
      guard let upstream = config.upstream else { return connection.close() }
      TunnelSession(
        connection: connection, context: context, listener: config, target: upstream, origin: origin
      ).start()
    }
  }
}
