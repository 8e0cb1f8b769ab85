import PinConfig
import PinEventLoop
import PinTLS
import PinTrust

extension TLSChannel {
  /// Terminates a client's TLS on `connection` with a leaf minted for
  /// `host` (an intercepted CONNECT, a tunnel listener with
  /// `downstreamTLS`): the channel reports to `owner`, and a refused
  /// handshake is logged as such.
  ///
  /// A client whose SNI names another host is refused before the server's
  /// flight (and the minted leaf) is sent: serving the leaf under another
  /// name would let one CONNECT reach a second host's policy.
  static func serve(
    _ connection: Connection, origin: ClientOrigin, engine: TLSEngine, host: TrustHost, target: String,
    logger: ProxyLogger,
    metrics: ProxyMetrics, listener: ListenerConfig, owner: any ChannelDelegate, early: [UInt8],
    timeout: Double, localCA: String? = nil,
    established: ((TLSChannel) -> Void)? = nil
  ) -> TLSChannel {
    let checks = Checks(beforeFlight: { engine in
      guard let name = engine.requestedServerName, TrustHost(name) != host else { return nil }
      return ProxyFailure(
        status: 502, code: .handshakeFailed,
        reason: "client asked for \(name) (SNI) inside a CONNECT to \(host)")
    })
    let channel = TLSChannel(connection: connection, engine: engine, checks: checks)
    channel.delegate = owner
    channel.start(early: early, timeout: timeout) { [unowned channel] result in
      // Before any application data is read: the owner may pick the
      // protocol ALPN settled on.
      guard case .failure(let failure) = result else { return established?(channel) ?? () }
      let reason: String
      var note: String?
      var code = FailureCode.handshakeFailed
      var chain: String?
      switch failure {
      case .tls(let error):
        if let report = engine.clientCertificateReport, let refused = report.refusalReason(for: error) {
          // Who the client is decided it: its certificate, named in the log line.
          (code, reason, chain) = (.clientNotAllowed, refused, report.certificate.map { "[\($0)]" })
          metrics.clientsRefused.increment([listener.name, "certificate"])
          break
        }
        reason = "client TLS handshake failed: \(error.description)"
        let diagnosis = HandshakeDiagnosis.code(for: error, engine: engine, requiresForwardSecrecy: false)
        if diagnosis == .tlsVersion { note = versionNote(listener) }
        if let localCA, rejectsOurCertificate(error.description) { note = untrustedCANote(localCA) }
      case .timedOut(let seconds): reason = "client TLS handshake took longer than \(seconds) s"
      case .refused(let refusal): reason = refusal.reason
      // The client went away; nothing was refused.
      case .closedByPeer, .closed: return
      }
      // Named because its settings decide what a client may offer.
      let name = listener.name
      var refusal = Refusal(
        ProxyFailure(status: 502, code: code, reason: reason, chain: chain), rule: "-", site: target)
      refusal.listener = name
      refusal.note = note
      refusal.log(to: logger, metrics, client: origin, level: .warning)
    }
    return channel
  }

  /// The client's alert says it does not trust the leaf we minted
  /// (`unknown ca`, `bad certificate`, `certificate unknown`, RFC 8446
  /// §6.2): it lacks the local CA.
  static func rejectsOurCertificate(_ error: String) -> Bool {
    let text = error.lowercased()
    return text.contains("alert unknown ca") || text.contains("alert bad certificate")
      || text.contains("alert certificate unknown")
  }

  /// What to do about a client that does not trust the local CA.
  static func untrustedCANote(_ certificate: String) -> String {
    "the client does not trust pinproxy's local CA: install \(certificate) in the client's trust store"
      + " (curl --cacert \(certificate), or copy it to /usr/local/share/ca-certificates/pinproxy.crt and run"
      + " update-ca-certificates)"
  }

  /// A client below the listener's TLS floor: the one setting that decides it.
  static func versionNote(_ listener: ListenerConfig) -> String {
    "the client's TLS version is below listener \(listener.name)'s floor, downstream.minimumTLSVersion"
      + " \"\(listener.downstream.minimumTLSVersion.rawValue)\"; lowering that key lets such clients in"
  }
}
