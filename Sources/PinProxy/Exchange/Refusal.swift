import Dispatch
import Foundation
import PinConfig
import PinHTTP

/// A refusal and everything said about it: the log event, the operator's
/// record (`RefusalLog`, with the incident id), the metric labels and
/// (through a `DownstreamLink`) the response. Every refusal — an HTTP/1.1
/// request, an HTTP/2 stream, a CONNECT, a tunnel, a client TLS handshake —
/// is reported through `log` or `report`, so the `refused` event's fields
/// have one owner.
struct Refusal {
  let failure: ProxyFailure
  let method: String
  /// The request's path (origin-form, or the path of an absolute URL), as
  /// sent; `ProxyLogger.shownPath` is what the log and the page show of it.
  let path: String?
  let rule: String
  /// The request's `User-Agent` (its first 200 characters), for the page.
  let userAgent: String?
  /// The routed rule's pins and anchors, from the snapshot the request was
  /// judged under (nil: looked up by `rule` in the one in force).
  let expected: RuleExpectation?
  /// The request's `Accept` lists `text/html`: a person is reading.
  let wantsHTML: Bool
  /// `host:port` the request was for, as far as it is known: the log's
  /// `host` field, the page's site.
  let site: String
  /// The id shared by the log line, the answer and the operator's page.
  let incident = RefusalLog.incidentID()
  /// When the request began (`DispatchTime` uptime nanoseconds), for its
  /// duration; the refusal's own creation when nothing earlier is known.
  var started = DispatchTime.now().uptimeNanoseconds
  /// How much the client is told (`listeners[].refusalDetail`).
  var detail = ListenerConfig.RefusalDetail.full
  /// The HTTP/2 stream the refusal answers.
  var stream: Int32?
  /// The listener whose settings decided it (client TLS refusals).
  var listener: String?
  /// A hint naming the one setting that would change the outcome.
  var note: String?

  init(
    _ failure: ProxyFailure, request: HTTPRequestHead? = nil, target: ForwardTarget? = nil,
    tunnel: ConnectTarget? = nil, rule: String? = nil, site: String? = nil
  ) {
    self.failure = failure
    method = request?.method ?? "-"
    let tunnelSite = tunnel.map { "\($0.host):\($0.port)" }
    self.site =
      site ?? target?.key.description ?? tunnelSite ?? Refusal.authority(of: request)
      ?? request?.headers.first("Host").map { String($0.prefix(200)) } ?? "-"
    switch request?.target {
    case .origin(let path)?: self.path = String(path.prefix(200))
    case .absolute(_, _, _, let path)?: self.path = String(path.prefix(200))
    default: self.path = nil
    }
    self.rule = rule ?? target?.route.ruleName ?? "-"
    userAgent = request?.headers.first("User-Agent").map { String($0.prefix(200)) }
    expected = target?.route.compiled.map(RuleExpectation.init)
    wantsHTML = RefusalPage.wanted(by: request)
  }

  private static func authority(of request: HTTPRequestHead?) -> String? {
    switch request?.target {
    case .absolute(_, let host, let port, _)?: return port.map { "\(host):\($0)" } ?? host
    case .authority(let host, let port)?: return "\(host):\(port)"
    default: return nil
    }
  }

  /// The page for a client that asked for HTML; nil for every other.
  func page(at time: Date) -> RefusalPage? {
    wantsHTML
      ? RefusalPage(failure: failure, host: site, rule: rule, time: time, incident: incident, detail: detail)
      : nil
  }

  /// The body of the answer in either protocol, and its content type:
  /// the page, or one line of text (`full`: the reason, with expected and
  /// presented pins; `summary`: the headline only), then the incident id.
  func responseBody(at time: Date) -> (bytes: [UInt8], type: String) {
    if let page = page(at: time) { return (page.html(), "text/html; charset=utf-8") }
    let reason = detail == .full ? failure.reason : RefusalPage.headline(failure.code)
    return (
      Array(
        "pinproxy: \(failure.code.rawValue): \(PrintableText.escaped(reason))\nincident: \(incident)\n".utf8),
      "text/plain; charset=utf-8"
    )
  }

  /// The `refused` event (a warning for what the upstream side caused,
  /// info for what the client did, unless `level` says otherwise), and its
  /// record for the operator's page.
  func log(
    to logger: ProxyLogger, _ metrics: ProxyMetrics, client: ClientOrigin, level: ProxyLogger.Level? = nil
  ) {
    let shownPath = path.map { String(logger.shownPath($0[...])) }
    var fields = [
      "code": failure.code.rawValue, "host": site, "rule": rule, "reason": failure.reason,
      "method": method, "status": String(failure.status), "client": client.peer, "incident": incident,
      "detail": failure.detail ?? "-", "chain": failure.chain ?? "-",
    ]
    if let shownPath { fields["path"] = shownPath }
    if let stream { fields["stream"] = String(stream) }
    if let listener { fields["listener"] = listener }
    if let note { fields["note"] = note }
    let level = level ?? (failure.status >= 500 ? .warning : .info)
    let now = Date()
    let expected = self.expected ?? metrics.refusalLog.expectation(of: rule)
    var record = RecordedRefusal(
      incident: incident, time: now, client: client.peer, clientKey: client.key, listener: listener,
      method: method, host: site, path: shownPath, userAgent: userAgent, rule: rule,
      code: failure.code.rawValue, status: failure.status, reason: failure.reason,
      chain: (failure.presented ?? []).prefix(RefusalLog.maxCertificates).map {
        PresentedCertificate($0, expected: expected)
      }
        + (failure.advice?.unsentAnchor.map { [PresentedCertificate(unsent: $0, expected: expected)] } ?? []),
      expected: expected, advice: failure.advice?.sentence, adviceYAML: failure.advice?.yaml)
    if let local = client.local {
      metrics.localActivity.refusal(local)
      // The line and the page name the user and program: written once the
      // lookup begun at accept has answered (at once, after the first).
      local.whenResolved(urgent: true) { [record, fields] in
        var (record, fields) = (record, fields)
        (record.clientUser, record.clientProgram) = (local.user, local.program)
        client.addFields(to: &fields)
        logger.log(level, "refused", fields: fields)
        metrics.refusalLog.record(record)
      }
    } else {
      logger.log(level, "refused", fields: fields)
      metrics.refusalLog.record(record)
    }
    metrics.rules.refused(rule: rule, code: failure.code, at: now)
  }

  /// The event, the record and the refusal counter; when it answered a
  /// request on `listener` (on loop `loop`), the request and its duration too.
  func report(
    to logger: ProxyLogger, _ metrics: ProxyMetrics, client: ClientOrigin, answering listener: String?,
    loop: Int,
    level: ProxyLogger.Level? = nil
  ) {
    var refusal = self
    if refusal.listener == nil { refusal.listener = listener }
    refusal.log(to: logger, metrics, client: client, level: level)
    metrics.refusal(failure, rule: rule)
    if let listener {
      if let local = client.local { metrics.localActivity.request(local) }
      metrics.listenerRefused(listener)
      metrics.request(
        listener: listener, status: failure.status, nanoseconds: DispatchTime.nanoseconds(since: started),
        loop: loop)
    }
  }

}
