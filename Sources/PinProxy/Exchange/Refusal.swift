import Foundation
import PinHTTP

/// A refusal and everything said about it: the log event, the metric
/// labels and (through a `DownstreamLink`) the response. Every refusal —
/// an HTTP/1.1 request, an HTTP/2 stream, a CONNECT, a tunnel, a client
/// TLS handshake — is reported through `report`, so the `refused` event's
/// fields have one owner.
struct Refusal {
  let failure: ProxyFailure
  let method: String
  /// What the log names: the routed upstream, else the tunnel's host, else
  /// (the start of) the request target.
  let target: String
  let rule: String
  /// The request's `Accept` lists `text/html`: a person is reading.
  let wantsHTML: Bool
  /// `host:port` the request was for, as far as it is known (for the page).
  let site: String
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
    self.site = site ?? target?.key.description ?? tunnelSite ?? Refusal.authority(of: request) ?? "-"
    self.target =
      site ?? target?.key.description ?? tunnelSite ?? request.map { String($0.rawTarget.prefix(200)) } ?? "-"
    self.rule = rule ?? target?.route.ruleName ?? "-"
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
    wantsHTML ? RefusalPage(failure: failure, host: site, rule: rule, time: time) : nil
  }

  /// The `refused` event: a warning for what the upstream side caused,
  /// info for what the client did, unless `level` says otherwise.
  func log(to logger: ProxyLogger, client: String, level: ProxyLogger.Level? = nil) {
    var fields = [
      "client": client, "method": method, "target": target, "rule": rule, "status": String(failure.status),
      "code": failure.code.rawValue, "reason": failure.reason, "detail": failure.detail ?? "-",
      "chain": failure.chain ?? "-",
    ]
    if let stream { fields["stream"] = String(stream) }
    if let listener { fields["listener"] = listener }
    if let note { fields["note"] = note }
    logger.log(level ?? (failure.status >= 500 ? .warning : .info), "refused", fields: fields)
  }

  /// The event and the refusal counter; when it answered a request on
  /// `listener`, the request counter too.
  func report(
    to logger: ProxyLogger, _ metrics: ProxyMetrics, client: String, answering listener: String?,
    level: ProxyLogger.Level? = nil
  ) {
    log(to: logger, client: client, level: level)
    metrics.refusal(failure, rule: rule)
    if let listener { metrics.request(listener: listener, status: failure.status) }
  }
}
