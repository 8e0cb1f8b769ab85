import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTrust
import Synchronization

/// The admin listener (`admin.address`, loopback by default): the
/// operator's page (`/`, HTML) and its data (`/status`, JSON), `/healthz`,
/// `/metrics` (Prometheus text) and `/policies` (JSON). Anything else is 404;
/// it never proxies. One request per connection.
///
/// Bounded so that it can never starve the data path of descriptors: at most
/// `maximumConnections` open at once (`AdminSlots`: a newcomer evicts the
/// connection waiting longest for its head, and health checks and scrapes
/// keep a reserve), and each must deliver its request and be answered
/// within `requestTimeout` (or `timeouts.clientHeader` when that is shorter).
final class AdminServer: Sendable {
  static let maximumConnections = 16
  static let requestTimeout = 10.0
  /// Accepts per readiness batch: the connections just accepted are read
  /// before many more arrive, so the slots never fill with unread ones.
  static let acceptsPerBatch = 4

  /// What a just-accepted connection has sent, looked at without reading
  /// it (`MSG_PEEK`): a whole head is a request to answer at once.
  static func arrival(_ fd: Int32) -> AdminSlots.Arrival {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1024) { buffer in
      let count = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_PEEK | MSG_DONTWAIT))
      guard count > 0 else { return .nothing }
      let bytes = UnsafeBufferPointer(rebasing: buffer[0..<count])
      let end: [UInt8] = [13, 10, 13, 10]
      let whole = count >= 4 && (0...(count - 4)).contains { bytes[$0..<($0 + 4)].elementsEqual(end) }
      return whole ? .wholeHead : .partOfHead
    }
  }

  let listener: Listener
  let slots = AdminSlots(capacity: AdminServer.maximumConnections)
  /// Listener rates for the page, sampled every few seconds.
  let rates: RateSampler

  init(address: HostPort, group: EventLoopGroup, context: ProxyContext) throws(ProxyServer.StartError) {
    guard
      let socketAddress = SocketAddress(
        ip: address.listeningIP, port: address.port)
    else { throw ProxyServer.StartError(description: "admin: \(address.host) is not an IP address") }
    let slots = self.slots
    let rates = RateSampler(metrics: context.metrics)
    self.rates = rates
    do {
      listener = try Listener(
        address: socketAddress, group: group,
        onExhausted: ProxyServer.exhaustionLogger(context.logger, "admin"),
        admits: { context.admitsAdmin($0) }, acceptsPerBatch: AdminServer.acceptsPerBatch
      ) { fd, peer, loop in
        let connection = Connection(fd: fd, address: peer, loop: loop)
        guard
          let slot = slots.admit(on: loop, arrival: AdminServer.arrival(fd), evict: { connection.close() })
        else {
          return connection.close()
        }
        AdminSession(connection: connection, context: context, rates: rates, slots: slots, slot: slot).start()
      }
    } catch {
      throw ProxyServer.StartError(description: "admin listener on \(address): \(error.description)")
    }
    rates.start()
  }
}

/// One admin connection. Confined to its connection's loop (`connection.loop.queue`).
final class AdminSession: ChannelDelegate, @unchecked Sendable {
  let connection: Connection
  let context: ProxyContext
  var parser = HTTP1Parser(
    role: .request, limits: HTTPLimits(maxHeaderBytes: 8192, maxHeaderCount: 50, maxURILength: 1024))
  var answered = false
  /// The request is a HEAD: its response has no body.
  var isHead = false
  var timer: LoopTimer?
  /// Bytes have been read and the slots told what they were (once).
  var decided = false
  let rates: RateSampler
  let slots: AdminSlots
  let slot: UInt64

  init(connection: Connection, context: ProxyContext, rates: RateSampler, slots: AdminSlots, slot: UInt64) {
    self.connection = connection
    self.context = context
    self.rates = rates
    self.slots = slots
    self.slot = slot
    connection.delegate = self
  }

  func start() {
    connection.loop.preconditionInLoop()
    let seconds = min(AdminServer.requestTimeout, context.snapshot.timeouts.clientHeader)
    timer = connection.loop.schedule(after: seconds) { [weak self] in
      self?.connection.close()
    }
    connection.resumeReading()
  }

  func channel(_ channel: any ByteChannel, didReadBuffer bytes: UnsafeRawBufferPointer) {
    connection.loop.preconditionInLoop()
    guard !answered else { return }
    do {
      var head: HTTPRequestHead?
      for event in try parser.feed(bytes) {
        if case .request(let request) = event {
          head = request
          break
        }
      }
      if !decided {
        decided = true
        // Pushed out while it waited, or no slot may go for it.
        guard slots.decide(slot, head == nil ? .partOfHead : .wholeHead) else { return connection.close() }
      }
      if let head { return answer(head) }
    } catch {
      respond(status: error.status, type: "text/plain", body: "\(PrintableText.escaped(error.reason))\n")
    }
  }

  func channelDidReadEOF(_ channel: any ByteChannel) {
    connection.loop.preconditionInLoop()
    connection.close()
  }
  func channelDidDrain(_ channel: any ByteChannel) {}
  func channelDidClose(_ channel: any ByteChannel, error: (any Error)?) {
    connection.loop.preconditionInLoop()
    timer?.cancel()
    slots.release(slot)
  }

  private func answer(_ head: HTTPRequestHead) {
    isHead = head.method == "HEAD"
    guard case .origin(let target) = head.target else {
      return respond(status: 404, type: "text/plain", body: "not found\n")
    }
    let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
    // One path changes state, and only by POST; every other is read-only.
    if path == "/reload" {
      guard head.method == "POST" else {
        return respond(
          status: 405, type: "text/plain", body: "POST /reload reloads the configuration\n",
          extra: [("Allow", "POST")])
      }
      if let refusal = accessRefusal(head, path: path) { return refusal() }
      return reload(head)
    }
    guard head.method == "GET" || head.method == "HEAD" else {
      return respond(status: 404, type: "text/plain", body: "not found\n")
    }
    guard slots.headArrived(slot, heavy: path == "/" || path == "/status") else {
      return respond(
        status: 503, type: "text/plain", body: "too many operator views at once; try again\n",
        extra: [("Retry-After", "1")])
    }
    if let refusal = accessRefusal(head, path: path) { return refusal() }
    switch path {
    case "/":
      gatherStatus { status in
        self.respond(
          status: 200, type: "text/html; charset=utf-8",
          body: OperatorPage(status: status).html(),
          extra: [
            ("Content-Security-Policy", OperatorPage.contentSecurityPolicy),
            ("X-Content-Type-Options", "nosniff"),
            ("Referrer-Policy", "no-referrer"),
          ])
      }
    case "/status":
      gatherStatus { status in
        let data = (try? OperatorStatus.encoder.encode(status)) ?? Data("{}".utf8)
        self.respond(status: 200, type: "application/json", body: Array(data) + [UInt8(ascii: "\n")])
      }
    case "/healthz":
      if context.isDraining {
        respond(status: 503, type: "text/plain", body: "draining\n")
      } else {
        respond(status: 200, type: "text/plain", body: "ok\n")
      }
    case "/metrics":
      let cache = context.trustEngine
      let gauges = ProxyMetrics.Gauges(
        cacheHits: cache.hits, cacheMisses: cache.misses, cacheEntries: cache.entryCount,
        openConnections: context.admission.open.load(ordering: .relaxed),
        upstreamSockets: context.budget.openSockets, upstreamSocketLimit: context.budget.socketLimit,
        generation: context.snapshot.generation,
        draining: context.isDraining, droppedLogLines: context.logger.droppedLines,
        pinStores: context.snapshot.pinStores,
        pinExpiries: context.snapshot.rules.compactMap { rule in
          guard rule.policy.policy.hasStaticPins, let expires = rule.policy.policy.pinsExpire else {
            return nil
          }
          return (rule.name, expires)
        }, revocationChecks: context.snapshot.revocation.counters.all,
        revocationHeld: (
          context.snapshot.revocation.fetched.crls.count, context.snapshot.revocation.fetched.answers.count
        ), pinHealth: context.snapshot.pinHealth(context.metrics.rules, at: Date()),
        unpinnedIssuances: context.snapshot.unpinnedIssuanceCounts(
          context.background.issuances.sightings, at: Date()))
      respond(status: 200, type: "text/plain; version=0.0.4", body: context.metrics.render(gauges))
    case "/policies":
      respond(
        status: 200, type: "application/json",
        body: PolicyReport.json(
          context.snapshot, activity: context.metrics.rules, sightings: context.background.issuances.sightings
        ))
    default:
      respond(status: 404, type: "text/plain", body: "not found\n")
    }
  }

  /// `POST /reload`: the same reload as SIGHUP, answered once the new
  /// configuration is in force (200, `ok generation N`) or was refused (422,
  /// the errors; the running one stays). Without a token only a loopback
  /// client may ask: a reload changes what the proxy does.
  private func reload(_ head: HTTPRequestHead) {
    answered = true
    let address = connection.peerAddress?.addressBytes ?? []
    if context.snapshot.adminAccess?.token == nil, !ClientAddressRules.loopback.allows(address) {
      return respond(
        status: 403, type: "text/plain", body: "a reload from another address needs the admin token\n")
    }
    guard let requester = context.reloadRequester.withLock({ $0 }) else {
      return respond(status: 503, type: "text/plain", body: "this process cannot reload\n")
    }
    if let refusal = crossSiteRefusal(head) {
      context.logger.log(
        .warning, "admin-refused", ["client": connection.peer, "path": "/reload", "reason": refusal])
      return respond(status: 403, type: "text/plain", body: refusal + "\n")
    }
    let home = connection.loop
    requester { outcome in
      home.execute {
        self.respond(
          status: outcome.ok ? 200 : 422, type: "text/plain; charset=utf-8",
          body: outcome.text.split(separator: "\n").map { PrintableText.escaped(String($0)) + "\n" }.joined())
      }
    }
  }

  /// Gathers each loop's pool census on that loop, then the status, back
  /// on this session's loop.
  private func gatherStatus(_ body: @escaping (OperatorStatus) -> Void) {
    // Answered from here on: bytes that follow start nothing more.
    answered = true
    let (home, context, rates) = (connection.loop, context, rates)
    let gathering = PoolGathering(remaining: context.group.loops.count)
    nonisolated(unsafe) let body = body
    for loop in context.group.loops {
      let pool = context.pool(for: loop)
      loop.execute {
        let census = pool.census()
        home.execute {
          gathering.rows += census
          gathering.remaining -= 1
          if gathering.remaining == 0 {
            body(OperatorStatus.gather(context, pools: gathering.rows, rates: rates))
          }
        }
      }
    }
  }

  /// Who may ask, under the snapshot in force: a scraper in
  /// `metricsClients` reads `/metrics` and `/healthz` without the token;
  /// every other request needs an address in the admin's clients and, when
  /// `tokenFile` is set, `Authorization: Bearer TOKEN`. Fail closed: no
  /// admin access compiled means loopback without a token, as the default.
  private func accessRefusal(_ head: HTTPRequestHead, path: String) -> (() -> Void)? {
    guard let access = context.snapshot.adminAccess else {
      // A reload removed `admin`; the listener stays bound until a restart,
      // and serves nothing meanwhile (its token, if any, is gone with it).
      return { self.respond(status: 403, type: "text/plain", body: "the admin endpoint is not configured\n") }
    }
    let address = connection.peerAddress?.addressBytes ?? []
    let scraper = (path == "/metrics" || path == "/healthz") && access.metricsClients.allows(address)
    // DNS rebinding: a request served without a token could come from a web
    // page the operator visits that pointed its own name at this address,
    // and read any admin view (policies, user names, clients, paths).
    // Browsers send that name as Host; an IP literal or localhost is what an
    // operator or a scraper types. One rule for every path.
    if access.token == nil || scraper, !AdminSession.isAddressHost(head.headers.first("Host")) {
      return {
        self.respond(
          status: 403, type: "text/plain",
          body: "Host must be an IP address or localhost (or send the admin token)\n")
      }
    }
    if scraper { return nil }
    guard access.allowedClients.allows(address) else {
      return { self.respond(status: 403, type: "text/plain", body: "forbidden\n") }
    }
    guard access.tokenMatches(head.headers.first("Authorization")) else {
      return {
        self.respond(
          status: 401, type: "text/plain", body: "a bearer token is required (Authorization: Bearer …)\n",
          extra: [("WWW-Authenticate", "Bearer realm=\"pinproxy-admin\"")])
      }
    }
    return nil
  }

  /// `Host` names an IP literal or `localhost`, with or without a port.
  static func isAddressHost(_ host: String?) -> Bool {
    guard let host else { return false }
    var name = host[...]
    if name.hasPrefix("[") {
      guard let close = name.firstIndex(of: "]") else { return false }
      return SocketAddress(ip: String(name[name.index(after: name.startIndex)..<close]), port: 0) != nil
    }
    if let colon = name.lastIndex(of: ":") { name = name[..<colon] }
    return name == "localhost" || SocketAddress(ip: String(name), port: 0) != nil
  }

  /// The reason phrase is the status's own (a 505 is never "Bad Request").
  /// A HEAD response has the GET's headers, Content-Length included, and no
  /// body (RFC 9110 §9.3.2, §8.6).
  private func respond(status: Int, type: String, body: String, extra: [(String, String)] = []) {
    respond(status: status, type: type, body: Array(body.utf8), extra: extra)
  }

  private func respond(status: Int, type: String, body bytes: [UInt8], extra: [(String, String)] = []) {
    answered = true
    let headers = HTTPHeaders(
      [
        ("Content-Type", type), ("Content-Length", String(bytes.count)), ("Cache-Control", "no-store"),
        ("Connection", "close"),
      ] + extra)
    let head = HTTPResponseHead(status: status, reason: HTTPStatus.reasonPhrase(status), headers: headers)
    connection.write(HTTPSerializer.responseHead(head) + (isHead ? [] : bytes))
    connection.closeAfterFlush()
  }
}

/// The pool census of every loop, collected on the admin session's loop.
private final class PoolGathering: @unchecked Sendable {
  var remaining: Int
  var rows: [PoolCensus] = []
  init(remaining: Int) { self.remaining = remaining }
}
