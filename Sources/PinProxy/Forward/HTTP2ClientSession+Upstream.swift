import Dispatch
import Foundation
import PinHTTP
import PinHTTP2

/// The upstream half of an HTTP/2 client's exchanges: responses relayed as
/// h2 frames, links released or closed, and refusals answered on their
/// stream only.
extension HTTP2ClientSession {
  func upstream(_ link: any UpstreamLink, didReceive events: [HTTP1Parser.Event]) {
    loop.preconditionInLoop()
    guard let stream = stream(of: link) else { return link.close() }
    for event in events {
      switch event {
      case .request:
        break
      case .response(let head):
        // Interim responses (1xx) are not relayed: the final one follows.
        guard head.status >= 200 else { continue }
        stream.responseTimer?.cancel()
        stream.responseStatus = head.status
        stream.upstreamKeepsAlive = head.keepAlive
        stream.responseHasBody = head.framing != .none
        let block =
          HTTP2Mapping.responseBlock(head) + [
            HTTP2Header("via", ForwardedRequest.via(stream.upstreamProtocol))
          ]
        do {
          try session.submitResponse(stream: stream.id, block, streaming: stream.responseHasBody)
        } catch {
          return abandonUpstream(of: stream, link)
        }
      case .body(let bytes):
        guard stream.responseStatus != nil else { continue }
        stream.responseBytes += bytes.count
        session.sendBody(stream: stream.id, bytes)
        // Back-pressure: a stream whose client does not keep up stops its upstream.
        if !stream.upstreamPaused && pausesUpstream(of: stream) {
          stream.upstreamPaused = true
          link.pauseReading()
        }
      case .end(let trailers):
        // The end of an interim response is not the end of the exchange.
        guard stream.responseStatus != nil else { continue }
        if stream.responseHasBody {
          session.endBody(stream: stream.id, trailers: HTTP2Mapping.trailerBlock(trailers))
        }
        finish(stream, link)
        return flush()
      }
    }
    flush()
  }

  func upstreamDidDrain(_ link: any UpstreamLink) {
    loop.preconditionInLoop()
    guard let stream = stream(of: link), stream.unconsumed > 0 else { return }
    session.consume(stream: stream.id, stream.unconsumed)
    stream.unconsumed = 0
    flush()
  }

  func upstreamDidClose(_ link: any UpstreamLink, failure: ProxyFailure?) {
    loop.preconditionInLoop()
    guard let stream = stream(of: link) else { return }
    forget(link)
    stream.responseTimer?.cancel()
    if stream.responseStatus == nil {
      // One fresh attempt when the origin never saw it (`mayRetryAfterClose`)
      // and no body byte was sent.
      if link.mayRetryAfterClose && !stream.retried && stream.requestBodyBytes == 0 {
        stream.retried = true
        stream.state = .connecting
        return retry(stream)
      }
      stream.state = .done
      fail(stream, failure ?? .unreachable("\(stream.target.key) closed the connection without a response"))
    } else {
      // Part of the response went out: only a reset tells the client it is cut short.
      stream.state = .done
      try? session.submitReset(stream: stream.id, errorCode: HTTP2ErrorCode.internalError)
    }
    flush()
  }

  /// The exchange completed: the link serves another (pooled HTTP/1.1
  /// connection, freed h2 slot) when the request was complete too.
  func finish(_ stream: HTTP2ClientStream, _ link: any UpstreamLink) {
    forget(link)
    stream.responseTimer?.cancel()
    stream.state = .done
    if stream.requestComplete && stream.upstreamKeepsAlive {
      link.release(
        to: UpstreamRelease(
          pool: pool, idleTimeout: snapshot.timeouts.upstreamIdle, maxIdle: snapshot.limits.maxIdlePerUpstream
        ))
    } else {
      link.close()
    }
    record(stream, status: stream.responseStatus ?? 502)
  }

  /// Refuses an exchange whose response has not started: its link closed,
  /// the failure answered on the stream.
  func fail(_ stream: HTTP2ClientStream, _ failure: ProxyFailure) {
    stream.responseTimer?.cancel()
    if let link = stream.link {
      forget(link)
      link.close()
    }
    stream.state = .done
    refuse(stream.id, stream.head, failure, target: stream.target)
  }

  /// Answers `failure` on one stream: status, `pinproxy-error`, and the
  /// plain-text reason or, for a client that asked for HTML, the page.
  func refuse(_ id: Int32, _ head: HTTPRequestHead?, _ failure: ProxyFailure, target: ForwardTarget? = nil) {
    let rule = target?.route.ruleName ?? "-"
    let site = target?.key.description ?? "\(tunnel.host):\(tunnel.port)"
    context.logger.log(
      failure.status >= 500 ? .warning : .info, "refused",
      [
        "client": client.peer, "method": head?.method ?? "-", "target": site, "rule": rule,
        "status": String(failure.status), "code": failure.code.rawValue, "reason": failure.reason,
        "detail": failure.detail ?? "-", "chain": failure.chain ?? "-", "stream": String(id),
      ])
    context.metrics.refusal(failure, rule: rule)
    context.metrics.request(listener: listener.name, status: failure.status)
    let page =
      RefusalPage.wanted(by: head) ? RefusalPage(failure: failure, host: site, rule: rule, time: Date()) : nil
    let body =
      page?.html()
      ?? Array("pinproxy: \(failure.code.rawValue): \(PrintableText.escaped(failure.reason))\n".utf8)
    let block = [
      HTTP2Header(":status", String(failure.status)),
      HTTP2Header("content-type", page == nil ? "text/plain; charset=utf-8" : "text/html; charset=utf-8"),
      HTTP2Header("content-length", String(body.count)),
      HTTP2Header("pinproxy-error", failure.code.rawValue),
      HTTP2Header("cache-control", "no-store"),
    ]
    try? session.submitResponse(stream: id, block, body: body)
  }

  private func record(_ stream: HTTP2ClientStream, status: Int) {
    context.metrics.request(listener: listener.name, status: status)
    guard context.logger.access else { return }
    let elapsed = DispatchTime.now().uptimeNanoseconds &- stream.started
    context.logger.access(
      AccessLine(
        client: client.peer, method: stream.head.method, host: stream.target.key.description,
        path: stream.target.path.prefix(200), status: status, sent: stream.requestBodyBytes,
        received: stream.responseBytes, upstreamMilliseconds: Int(elapsed / 1_000_000),
        upstreamConnection: stream.upstreamWasPooled ? "pooled" : "new",
        upstreamTLS: stream.upstreamTLS.rawValue,
        upstreamProtocol: stream.upstreamProtocol.rawValue, clientProtocol: "h2"))
  }
}
