import Dispatch
import Foundation
import PinHTTP
import PinHTTP2

/// The client's streams: each new request routed (or refused on its
/// stream), its body and end passed to its exchange, its reset counted.
extension DownstreamHTTP2Session {
  /// The client's events, in order; then what they caused is flushed.
  func handle(_ events: [HTTP2Event]) {
    var index = 0
    while index < events.count {
      let event = events[index]
      index += 1
      switch event {
      case .headers(let id, let block):
        if let stream = streams[id] {
          stream.requestTrailers = HTTP2Mapping.trailers(block)
        } else {
          let ends = index < events.count && events[index] == .endStream(stream: id)
          begin(id, block, endsStream: ends)
          if ends { index += 1 }
        }
      case .data(let id, let bytes):
        if let stream = streams[id] {
          stream.requestBody(bytes)
        } else {
          // A refused or finished stream: its DATA is dropped, its window kept open.
          session.consume(stream: id, bytes.count)
        }
      case .endStream(let id):
        endOfRequest(id)
      case .streamClosed(let id, let code):
        streamClosed(id, code: code)
      case .refused(let id):
        context.metrics.http2Events.increment(["downstream", "malformed"])
        logBadRequest(.info, "malformed HTTP/2 request on stream \(id) (RFC 9113 §8.2), reset")
      case .oversizedHeaders(let id):
        context.metrics.http2Events.increment(["downstream", "oversized_headers"])
        let limits = snapshot.httpLimits
        logBadRequest(
          .info,
          "HTTP/2 header block on stream \(id) over \(limits.maxHeaderCount) fields or \(limits.maxHeaderBytes) bytes, reset"
        )
      case .goAway:
        if !isClosed { state = .clientWentAway }
      case .settings, .pingAcknowledged:
        break
      }
    }
    flush()
  }

  private func begin(_ id: Int32, _ block: [HTTP2Header], endsStream: Bool) {
    cancelIdleTimer()
    if !context.isCurrent(snapshot) {
      snapshot = context.snapshot
      router = ForwardRouter(snapshot: snapshot, listener: listener, client: origin)
    }
    guard isServing else {
      try? session.submitReset(stream: id, errorCode: HTTP2ErrorCode.refusedStream)
      return
    }
    let head: HTTPRequestHead
    switch HTTP2Mapping.requestHead(block, endsStream: endsStream) {
    case .success(let mapped): head = mapped
    case .failure(.connect):
      return refuse(
        id, nil,
        ProxyFailure(
          status: 501, code: .badRequest,
          reason: "CONNECT inside HTTP/2 is not supported; open a tunnel per host"))
    case .failure(.malformed(let reason)):
      context.metrics.http2Events.increment(["downstream", "malformed"])
      return refuse(id, nil, .badRequest("malformed HTTP/2 request: \(reason)"))
    }
    // The bound an HTTP/1.1 request line gets: a long `:path` would otherwise
    // be limited only by the header list and go on to an HTTP/1.1 origin.
    let maxURILength = snapshot.httpLimits.maxURILength
    guard head.rawTarget.utf8.count <= maxURILength else {
      return refuse(id, nil, .badRequest("request target longer than \(maxURILength) bytes", status: 414))
    }
    if let refusal = router.refusal { return refuse(id, head, refusal) }
    // The tunnel was opened with this credential: a reload that removed its
    // user (or changed the password) ends the tunnel's service.
    if let refusal = router.authenticator?.inheritanceRefusal(credential) {
      return refuse(id, head, ProxyFailure(refusal))
    }
    switch router.route(head, inside: tunnel) {
    case .forward(let target):
      let exchange = Exchange(
        id: nextExchangeID(), request: head, target: target, clientProtocol: .http2,
        started: DispatchTime.now().uptimeNanoseconds)
      let stream = DownstreamHTTP2Stream(id: id, exchange: exchange, host: self)
      streams[id] = stream
      context.metrics.http2StreamsInFlight.add(1)
      if endsStream { stream.requestEnd(HTTPHeaders()) }
      // Every stream answers within the response timeout, whatever it waits
      // for (its body, a free upstream slot); the exchange re-arms it for the origin.
      stream.armTimer()
      // A small body of declared length is held until it is complete, so
      // that a content-length the DATA contradicts (RFC 9113 §8.1.1, which
      // nghttp2 answers with a reset) never reaches the origin at all.
      if case .length(let length) = head.framing, !endsStream, length <= Self.heldBodyLimit {
        stream.hold = .body
        return
      }
      startOrQueue(stream)
    case .refuse(let failure):
      refuse(id, head, failure)
    case .passthrough, .intercept:
      refuse(id, head, .badRequest("CONNECT inside HTTP/2 is not supported"))
    }
  }

  private func endOfRequest(_ id: Int32) {
    guard let stream = streams[id] else { return }
    stream.requestEnd(stream.requestTrailers)
    if stream.hold == .body {
      stream.hold = .none
      startOrQueue(stream)
    }
  }

  private func streamClosed(_ id: Int32, code: UInt32) {
    guard let stream = streams.removeValue(forKey: id) else { return }
    context.metrics.http2StreamsInFlight.add(-1)
    if code != HTTP2ErrorCode.noError {
      context.metrics.http2Events.increment(["downstream", "reset_received"])
      // An exchange the client cancelled before its answer: each one cost an
      // upstream request. Past the bucket, the connection ends (rapid reset).
      if !stream.machine.isDone && !resets.take(now: DispatchTime.now().uptimeNanoseconds) {
        stream.abandon()
        return endForFlood()
      }
    }
    stream.abandon()
    if streams.isEmpty { becameIdle() }
  }

  /// CVE-2023-44487: too many exchanges started and cancelled by the client.
  private func endForFlood() {
    context.metrics.http2Events.increment(["downstream", "rapid_reset"])
    logBadRequest(
      .warning,
      "HTTP/2 rapid reset: more than \(ResetBucket.burst) requests cancelled in a burst; connection ended")
    state = .draining
    try? session.submitGoAway(errorCode: HTTP2ErrorCode.enhanceYourCalm)
    flush()
    closeAll()
  }

  /// Takes an upstream for `stream`'s exchange: its answer goes to the
  /// stream's machine while the stream is still open and acquiring.
  func acquire(for stream: DownstreamHTTP2Stream, poolAllowed: Bool) {
    let bodyFollows = stream.machine.exchange.hasBody
    acquirer.acquire(stream.target, poolAllowed: poolAllowed, bodyFollows: bodyFollows) {
      [weak self, weak stream] result in
      guard let self, let stream, stream.machine.isConnecting, self.streams[stream.id] === stream else {
        if case .success(let acquired) = result { acquired.link.close() }
        return
      }
      switch result {
      case .failure(let failure):
        stream.run { $0.dialFailed(failure, &$1) }
      case .success(let acquired):
        let link = acquired.link
        let handle = stream.holdUpstream(link)
        stream.run {
          $0.upstreamReady(
            handle, pooled: acquired.pooled, tls: link.tls, protocol: link.protocolName,
            responseDeadline: Deadline(seconds: self.responseTimeout, from: self.loop.now), &$1)
        }
      }
      self.flush()
    }
  }

  /// Answers `failure` on one stream (`Refusal`, through `HTTP2Downstream`).
  /// - Parameter started: when the stream's request began (its duration).
  func refuse(
    _ id: Int32, _ head: HTTPRequestHead?, _ failure: ProxyFailure, target: ForwardTarget? = nil,
    started: UInt64? = nil
  ) {
    var refusal = Refusal(failure, request: head, target: target, tunnel: tunnel)
    refusal.stream = id
    refusal.detail = snapshot.refusalDetail(for: listener)
    if let started { refusal.started = started }
    refusal.report(
      to: context.logger, context.metrics, client: origin, answering: listener.name, loop: loop.index)
    var downstream = HTTP2Downstream(session: session, stream: id)
    downstream.refuse(refusal, at: Date())
  }
}
