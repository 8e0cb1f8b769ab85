import Foundation
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

struct InternalResponse: Sendable {
  let status: Int
  let headers: HTTPHeaders
  let body: [UInt8]
  /// The body's charge in the request's budget, given back when the
  /// response (and every copy of this hold) is let go of.
  var hold: FetchHold? = nil
}

/// Drives one `InternalRequest` on `loop` (its queue only) and calls
/// `completion` once, on that queue.
final class InternalExchange: UpstreamDelegate, @unchecked Sendable {
  private enum State {
    case dialing
    case waiting(UpstreamConnection, head: HTTPResponseHead?, body: [UInt8])
    case done
  }

  private let request: InternalRequest
  private let loop: EventLoop
  private var state = State.dialing
  private var timer: LoopTimer?
  private var completion: ((Result<InternalResponse, ProxyFailure>) -> Void)?
  /// The exchange owns itself until it finishes: the connection holds its
  /// delegate weakly, and nothing else holds an exchange in flight.
  private var retainedUntilFinished: InternalExchange?
  /// Bytes of `request.budget` the body's storage holds now.
  private var charged = 0

  private init(
    request: InternalRequest, loop: EventLoop,
    completion: @escaping (Result<InternalResponse, ProxyFailure>) -> Void
  ) {
    self.request = request
    self.loop = loop
    self.completion = completion
  }

  /// - Parameter dialer: the upstream dialer of the snapshot in force.
  static func start(
    _ request: InternalRequest, dialer: UpstreamDialer, on loop: EventLoop,
    _ completion: @escaping @Sendable (Result<InternalResponse, ProxyFailure>) -> Void
  ) {
    loop.execute {
      let exchange = InternalExchange(request: request, loop: loop, completion: completion)
      exchange.begin(dialer)
    }
  }

  private func begin(_ dialer: UpstreamDialer) {
    loop.preconditionInLoop()
    retainedUntilFinished = self
    let url = request.url
    let ruled = UpstreamRoute(host: url.host, snapshot: dialer.snapshot)
    let route: UpstreamRoute
    if request.followsCertificate {
      // A URL an origin's certificate chose: plain HTTP to wherever it
      // points, but internal addresses only where a domain rule names the
      // host exactly (or connectTo maps it), as for any upstream dial.
      var plain = UpstreamRoute.plain(
        url.host, namedExplicitly: ruled?.namedExplicitly ?? false,
        parent: ruled?.parent ?? dialer.snapshot.defaultParent)
      plain.followsCertificate = true
      route = plain
    } else {
      guard let ruled else { return finish(.failure(.denied(url.host))) }
      route = ruled
    }
    guard !request.followsCertificate || !url.tls else {
      return finish(.failure(.unreachable("\(url) is not plain http, as revocation URLs are")))
    }
    guard url.tls || route.allowsInsecureHTTPLoads else {
      return finish(
        .failure(
          ProxyFailure(
            status: 403, code: .deniedByPolicy,
            reason: "\(url) is plain http and the rule for \(url.host) does not allow insecure loads")))
    }
    timer = loop.schedule(after: request.deadline) { [weak self] in
      guard let self else { return }
      self.finish(.failure(.timeout("no complete response from \(url) within \(self.request.deadline) s")))
    }
    let key = UpstreamKey(host: url.host, port: url.port, tls: url.tls, policy: route.identity)
    let limits = dialer.snapshot.httpLimits
    dialer.open(key, route: route, on: loop) { [self] result in
      switch result {
      case .failure(let failure):
        finish(.failure(failure))
      case .success(let dialed):
        guard case .dialing = state else { return dialed.close() }
        let upstream = UpstreamConnection(key: key, dialed: dialed, limits: limits)
        upstream.delegate = self
        state = .waiting(upstream, head: nil, body: [])
        send(on: upstream)
      }
    }
  }

  private func send(on upstream: UpstreamConnection) {
    var headers = HTTPHeaders([("User-Agent", "pinproxy")])
    for (name, value) in request.headers { headers.add(name, value) }
    let hasBody = !request.body.isEmpty || request.method == "POST"
    let head = HTTPRequestHead(
      method: request.method, target: .origin(request.url.target), rawTarget: request.url.target,
      version: .http11, headers: headers, framing: hasBody ? .length(request.body.count) : .none)
    // The connection is closed after the response (`finish`), never pooled.
    upstream.sendHead(
      ForwardedRequest(head: head, path: request.url.target, authority: request.url.authority))
    if hasBody { upstream.sendBody(request.body) }
  }

  private func finish(_ result: Result<InternalResponse, ProxyFailure>) {
    loop.preconditionInLoop()
    if case .waiting(let upstream, _, _) = state { upstream.close() }
    state = .done
    var result = result
    if case .success(var response) = result {
      // The charge goes with the body; a failure gives it back now.
      response.hold = FetchHold(budget: request.budget, bytes: charged)
      result = .success(response)
    } else {
      request.budget?.release(charged)
    }
    charged = 0
    timer?.cancel()
    timer = nil
    let completion = self.completion
    self.completion = nil
    completion?(result)
    retainedUntilFinished = nil
  }

  func upstream(_ upstream: any UpstreamLink, didReceive events: [HTTP1Parser.BorrowedEvent]) {
    loop.preconditionInLoop()
    guard case .waiting(let connection, var head, var body) = state, connection === upstream else { return }
    // The state lets go of the body while it grows: were it still held
    // there, the first append of every read would copy the whole body so far
    // (copy-on-write), quadratic in the number of reads. `finish` still sees
    // the connection in the state, to close it.
    state = .waiting(connection, head: head, body: [])
    for event in events {
      switch event {
      case .request: break
      case .response(let response):
        // Interim responses (1xx) are skipped; the final one counts.
        guard response.status >= 200 else { break }
        head = response
        // A declared length past the bound is refused before a byte of it is kept.
        if case .length(let length) = response.framing, length > request.maximumBodyBytes {
          return finish(.failure(tooLarge))
        }
      case .body(let bytes):
        guard body.count + bytes.count <= request.maximumBodyBytes else { return finish(.failure(tooLarge)) }
        if body.count + bytes.count > body.capacity,
          !grow(&body, toHold: body.count + bytes.count, declared: head?.framing)
        {
          return finish(.failure(.unreachable(request.budget?.exhaustedReason ?? "out of memory")))
        }
        body += bytes
      case .end:
        if let head {
          return finish(.success(InternalResponse(status: head.status, headers: head.headers, body: body)))
        }
      }
    }
    state = .waiting(connection, head: head, body: body)
  }

  private var tooLarge: ProxyFailure {
    .unreachable("the response from \(request.url) is larger than \(request.maximumBodyBytes) bytes")
  }

  /// Grows `body`'s storage to hold `count` bytes: at once to a declared
  /// length, else doubling as an append would, never past the body bound.
  /// The new storage is charged to the request's budget before it is
  /// made, while the old is still held (both exist during the copy), and
  /// the old is given back after; false when the budget is spent. Storage
  /// is counted, not bytes: what the process holds.
  private func grow(_ body: inout [UInt8], toHold count: Int, declared: BodyFraming?) -> Bool {
    var target = min(max(count, body.capacity * 2, 4096), request.maximumBodyBytes)
    if case .length(let length)? = declared, length >= count { target = length }
    if let budget = request.budget {
      guard budget.charge(target) else { return false }
      body.reserveCapacity(target)
      budget.release(charged)
      charged = target
    } else {
      body.reserveCapacity(target)
    }
    return true
  }

  func upstreamDidDrain(_ upstream: any UpstreamLink) {}

  func upstreamDidClose(_ upstream: any UpstreamLink, failure: ProxyFailure?) {
    loop.preconditionInLoop()
    guard case .waiting(let connection, _, _) = state, connection === upstream else { return }
    finish(
      .failure(failure ?? .unreachable("\(request.url) closed the connection before the response ended")))
  }
}
