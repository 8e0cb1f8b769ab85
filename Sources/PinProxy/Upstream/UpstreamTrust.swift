import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// Told about every refused chain and every pin failure a rule's
/// `report.enforce: false` waived (the pin-failure reporter implements it;
/// owned here so that the dial path does not depend on what reports).
protocol PinFailureReporting: Sendable {
  func refused(_ failure: TrustFailure, presented: [X509Certificate], key: UpstreamKey, route: UpstreamRoute)
  func waived(_ failure: TrustFailure, presented: [X509Certificate], key: UpstreamKey, route: UpstreamRoute)
}

/// Fetches revocation information a decision waits for, then calls back on
/// `loop`'s queue (the revocation fetcher implements it; owned here so that
/// the dial path does not depend on the internal client).
protocol RevocationFetching: Sendable {
  func fetch(
    _ fetches: [RevocationFetch], dialer: UpstreamDialer, on loop: EventLoop,
    _ completion: @escaping () -> Void)
}

/// Where the upstream trust decision is taken: once the TLS handshake with
/// an origin completes, before any request byte is written (the
/// `established` check of its `TLSChannel`). The policy decides through the
/// fingerprint cache, with the very evaluation `pinproxy evaluate` runs
/// (key strength and the certificate profile included), so the daemon and
/// the CLI give the same answer for the same chain, host, policy and time.
///
/// A rule with `dynamicPins` is evaluated under its list as it is at this
/// moment, and the verdict is cached under that list's version, so a list
/// update is in force for the very next handshake.
struct UpstreamTrust {
  let key: UpstreamKey
  let route: UpstreamRoute
  let engine: TrustEngine
  let reporter: (any PinFailureReporting)?
  /// Fetches revocation information the rule looks for; nil decides with
  /// what is at hand (the reporter's own posts).
  var revocation: RevocationFetchRoute?
  /// The snapshot the rule was compiled in: where its pins are written, for
  /// the advice a pin failure carries (nil: none given).
  var snapshot: RuntimeSnapshot?
  /// The staple kept with the session this handshake resumes, if any.
  var resumedStaple: [UInt8]?
  /// Where evaluation times (on loop `loopIndex`'s cells) and each rule's
  /// verdicts and pin health go. The daemon's own fetches (pin lists,
  /// reports, revocation) count too: they are upstream connections judged
  /// by the rule governing their host.
  var metrics: ProxyMetrics?
  var loopIndex = 0
  static let maxPresentedCertificates = 32

  /// How the dial path reaches the fetcher, and the dialer and loop it fetches with.
  struct RevocationFetchRoute {
    let fetcher: any RevocationFetching
    let dialer: UpstreamDialer
    let loop: EventLoop
  }

  /// The staple this handshake's decision uses: the one it carried or, on
  /// a resumed session, the one stapled to the full handshake it resumes
  /// (a resumed handshake carries none).
  func staple(of tls: TLSEngine) -> [UInt8]? {
    tls.stapledResponse() ?? (tls.sessionReused ? resumedStaple : nil)
  }

  /// Accepts, refuses, or waits for revocation fetches and then decides
  /// without fetching again.
  func verdict(of tls: TLSEngine) -> TLSChannel.Verdict {
    let presented = tls.peerChain()
    // Real chains have 2–4 certificates; each one presented is parsed and
    // hashed, so a server cannot make every handshake cost hundreds.
    guard presented.count <= Self.maxPresentedCertificates else {
      return .refuse(
        ProxyFailure(
          status: 502, code: .untrustedChain,
          reason:
            "\(key) presented \(presented.count) certificates (at most \(Self.maxPresentedCertificates))"))
    }
    // A TLS route always has a policy; without one nothing could be accepted.
    guard let policy = route.policy else {
      return .refuse(ProxyFailure(status: 502, code: .untrustedChain, reason: "no trust policy for \(key)"))
    }
    let chain = PresentedChain(presented.map(\.der))
    let staple = staple(of: tls)
    var cached = false
    let decision = timed(&cached) {
      policy.evaluate(
        chain, host: route.host, dynamicPins: route.pinStore?.requirement(), staple: staple,
        fetching: revocation != nil, engine: engine, at: Date(), cached: &$0)
    }
    guard case .rejected(.revocationPending(let fetches)) = decision, let revocation else {
      return conclude(decision, policy: policy, presented: presented, tls: tls, cached: cached)
    }
    return .wait { done in
      revocation.fetcher.fetch(fetches, dialer: revocation.dialer, on: revocation.loop) {
        var cached = false
        let again = timed(&cached) {
          policy.evaluate(
            chain, host: route.host, dynamicPins: route.pinStore?.requirement(), staple: staple,
            fetching: false, engine: engine, at: Date(), cached: &$0)
        }
        if case .refuse(let failure) = conclude(
          again, policy: policy, presented: presented, tls: tls, cached: cached)
        {
          return done(failure)
        }
        done(nil)
      }
    }
  }

  /// Runs one evaluation and records its duration, by whether the cache served it.
  private func timed(_ cached: inout Bool, _ evaluate: (inout Bool) -> TrustDecision) -> TrustDecision {
    let start = DispatchTime.now().uptimeNanoseconds
    let decision = evaluate(&cached)
    metrics?.trustEvaluationDuration.observe(
      cached ? 0 : 1, nanoseconds: DispatchTime.nanoseconds(since: start), loop: loopIndex)
    return decision
  }

  private func conclude(
    _ decision: TrustDecision, policy: CompiledPolicy, presented: [X509Certificate], tls: TLSEngine,
    cached: Bool
  ) -> TLSChannel.Verdict {
    switch decision {
    case .rejected(let failure):
      reporter?.refused(failure, presented: presented, key: key, route: route)
      var refusal = ProxyFailure.refused(failure, presented: presented)
      if let rule = route.compiled, let snapshot,
        let advice = PinRotationAdvice.make(
          failure, rule: rule, snapshot: snapshot, presented: refusal.presented ?? [])
      {
        refusal = refusal.advised(advice)
      }
      return .refuse(refusal)
    case .trusted(let acceptance):
      // SCTs arrive with each handshake (the TLS extension, the OCSP
      // staple), not with the chain, so they are counted for every
      // connection, outside the fingerprint cache.
      if let logs = route.transparency,
        let failure = policy.transparencyFailure(presented, evidence: .handshake(tls), logs: logs, at: Date())
      {
        return .refuse(.refused(failure, presented: presented))
      }
      // Accepted on a failed pin check only because the rule is report-only
      // (`report.enforce: false`); the chain itself passed (`RuleEvaluator`).
      if let waived = acceptance.waivedPinFailure {
        reporter?.waived(waived, presented: presented, key: key, route: route)
      }
      // The pin health is judged again only after a full evaluation: a cache
      // hit met this very chain before. It is judged on the path the pins
      // were checked against (as built, its anchor included: a pinned root
      // the server does not send is still what the rule met), not on what
      // the server happened to send.
      if let rule = route.compiled {
        let path = cached ? nil : acceptance.path.isEmpty ? presented.map { $0.value() } : acceptance.path
        metrics?.rules.accepted(rule: rule, chain: path, at: Date())
      }
      return .accept
    }
  }

  /// The failure a client gets for a handshake that did not complete.
  func failure(_ failure: TLSChannel.HandshakeFailure, tls: TLSEngine) -> ProxyFailure {
    switch failure {
    case .refused(let refusal):
      return refusal
    case .tls(let error):
      let code = HandshakeDiagnosis.code(
        for: error, engine: tls, requiresForwardSecrecy: route.context?.requiresForwardSecrecy ?? true)
      return .handshake(code, key.description, detail: error.description)
    case .timedOut(let seconds):
      return .timeout("TLS handshake with \(key) took longer than \(seconds) s")
    case .closedByPeer:
      return .handshake(
        .handshakeFailed, key.description, detail: "the server closed the connection during the handshake")
    case .closed(let error):
      return .cannotConnect(key.description, detail: error.map { "\($0)" } ?? "closed")
    }
  }
}
