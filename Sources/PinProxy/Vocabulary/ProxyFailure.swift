import PinHTTP
import PinTLS
import PinTrust

/// Why the proxy could not serve a request, as a client will see it: a
/// status, a stable failure code and a sentence; and, for refused chains, the
/// pins and digests of what the upstream presented (for the log line).
public struct ProxyFailure: Error, Sendable {
  public let status: Int
  public let code: FailureCode
  public let reason: String
  public var chain: String?
  /// The certificates the upstream presented, leaf first, for the
  /// operator's page (refused chains only).
  public var presented: [Certificate]?
  /// What only the operator's log gets: the OS or OpenSSL error behind a
  /// failed dial or handshake. Kept out of the response so that a client
  /// cannot use the proxy to tell closed ports from plain-text or TLS ones.
  public var detail: String?
  /// For a pin failure on an otherwise valid chain: the pin to add, where.
  var advice: PinRotationAdvice?
  /// An `upstream-unreachable` dial that the target itself refused (a
  /// reset: nothing listens on the port), as opposed to one with no route:
  /// a SOCKS5 client is told which (RFC 1928 §6, 0x05 or 0x04) from this,
  /// never from the reason's words.
  var connectionRefused = false
  /// Fields the answer needs beside the standard ones: the challenge of a
  /// 407 (`Proxy-Authenticate`), the `Retry-After` of a 429.
  public var headers: [(name: String, value: String)] = []

  public init(
    status: Int, code: FailureCode, reason: String, chain: String? = nil, detail: String? = nil,
    headers: [(name: String, value: String)] = []
  ) {
    self.status = status
    self.code = code
    self.reason = reason
    self.chain = chain
    self.detail = detail
    self.headers = headers
  }

  /// The same refusal with `advice`: its sentence ends the reason (the
  /// client's answer, the log line and the page all say it).
  func advised(_ advice: PinRotationAdvice) -> ProxyFailure {
    var advised = ProxyFailure(
      status: status, code: code, reason: reason + "; " + advice.sentence, chain: chain, detail: detail,
      headers: headers)
    advised.presented = presented
    advised.advice = advice
    return advised
  }

  static func refused(_ failure: TrustFailure, presented: [X509Certificate]) -> ProxyFailure {
    let values = presented.map { $0.value() }
    var refusal = ProxyFailure(
      status: 502, code: failure.code, reason: failure.reason, chain: describe(values))
    refusal.presented = values
    return refusal
  }

  static func unreachable(_ reason: String, detail: String? = nil) -> ProxyFailure {
    ProxyFailure(status: 502, code: .upstreamUnreachable, reason: reason, detail: detail)
  }

  /// A dial that failed: the response names the target only.
  static func cannotConnect(_ target: String, detail: String, refused: Bool = false) -> ProxyFailure {
    var failure = ProxyFailure.unreachable("cannot connect to \(target)", detail: detail)
    failure.connectionRefused = refused
    return failure
  }

  /// A TLS handshake that failed: the response names the code and target only.
  static func handshake(_ code: FailureCode, _ target: String, detail: String) -> ProxyFailure {
    ProxyFailure(status: 502, code: code, reason: "TLS handshake with \(target) failed", detail: detail)
  }

  /// The parent proxy answered the tunnel request with a no.
  static func parentRefused(_ parent: ParentProxy, _ target: String, answer: String) -> ProxyFailure {
    ProxyFailure(
      status: 502, code: .parentProxyRefused,
      reason: "parent proxy \(parent.name) refused the tunnel to \(target): \(answer)")
  }

  /// The parent proxy could not be reached or did not open the tunnel.
  static func parentUnreachable(_ parent: ParentProxy, _ target: String, why: String) -> ProxyFailure {
    ProxyFailure(
      status: 502, code: .parentProxyUnreachable,
      reason: "no tunnel to \(target) through parent proxy \(parent.name) (\(parent.url)): \(why)")
  }

  static func timeout(_ reason: String) -> ProxyFailure {
    ProxyFailure(status: 504, code: .upstreamTimeout, reason: reason)
  }

  /// No rule governs the host and the defaults deny it.
  static func denied(_ host: TrustHost) -> ProxyFailure {
    ProxyFailure(
      status: 403, code: .deniedByPolicy, reason: "no domain rule matches \(host) and defaults.action is deny"
    )
  }

  static func badRequest(_ reason: String, status: Int = 400) -> ProxyFailure {
    ProxyFailure(status: status, code: .badRequest, reason: reason)
  }

  /// `subject sha256/SPKI cert-sha256=HEX` per certificate, leaf first.
  static func describe(_ chain: [Certificate]) -> String {
    chain.map { value in "[\(value.subject) \(value.spkiPin) sha256=\(value.fingerprint.base64)]" }.joined(
      separator: " ")
  }

  static func reasonPhrase(_ status: Int) -> String { HTTPStatus.reasonPhrase(status) }
}
