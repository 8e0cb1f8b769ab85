import Foundation
import PinTrust
import Synchronization

/// Revocation information the daemon fetched: CRLs by distribution point
/// URL, OCSP answers by CertID, and recent failures (so a dead responder is
/// not asked again for every handshake). Shared by every connection and
/// kept across reloads; bounded in entries and bytes.
///
/// Every change that could alter a verdict bumps `generation`, which keys
/// the fingerprint cache: a CRL or answer that arrives is in force for the
/// very next handshake.
public final class FetchedRevocation: Sendable {
  public struct StoredCRL: Sendable {
    public let url: String
    public let crl: CertificateRevocationList
    public let fetchedAt: Date
  }

  public struct StoredAnswer: Sendable {
    public let url: String
    /// The request it answered, to ask again before nextUpdate.
    public let request: [UInt8]
    public let der: [UInt8]
    public let thisUpdate: Date
    public let nextUpdate: Date?
    /// It says revoked (not certificateHold): no later "good" replaces it.
    public let revoked: Bool
    /// The certificate and issuer it is about (DER), to ask again.
    public let leaf: [UInt8]
    public let issuer: [UInt8]
    public let fetchedAt: Date
  }

  private struct State {
    var crls: [String: StoredCRL] = [:]
    var crlBytes = 0
    var answers: [Digest256: StoredAnswer] = [:]
    var failures: [String: (why: String, until: Date)] = [:]
  }

  public static let maximumCRLs = 256
  public static let maximumCRLBytes = 128 << 20
  public static let maximumAnswers = 8192
  public static let maximumFailures = 4096
  /// A failed fetch is not tried again for this long.
  public static let failureBackoff: TimeInterval = 60

  private let state = Locked(State())
  private let counter = Atomic<UInt64>(1)

  public init() {}

  public var generation: UInt64 { counter.load(ordering: .acquiring) }
  private func bump() { counter.add(1, ordering: .releasing) }

  public func crl(at url: String) -> StoredCRL? { state.withLock { $0.crls[url] } }
  public func answer(for certID: Digest256) -> StoredAnswer? { state.withLock { $0.answers[certID] } }
  public var crls: [StoredCRL] { state.withLock { Array($0.crls.values) } }
  /// What is due again: CRLs and answers whose nextUpdate is near (the
  /// last tenth of their validity, at least `lead`), as fetches.
  public func due(at time: Date, lead: TimeInterval) -> [RevocationFetch] {
    state.withLock { state in
      var due: [RevocationFetch] = []
      for stored in state.crls.values {
        guard let next = stored.crl.nextUpdate else { continue }
        let window = max(lead, next.timeIntervalSince(stored.crl.thisUpdate) / 10)
        if next.timeIntervalSince(time) < window {
          due.append(.crl(url: stored.url, issuer: stored.crl.verifiedIssuer?.der ?? []))
        }
      }
      for (certID, stored) in state.answers {
        let next =
          stored.nextUpdate ?? stored.thisUpdate.addingTimeInterval(RevocationCheck.undatedAnswerLifetime)
        let window = max(lead, next.timeIntervalSince(stored.thisUpdate) / 10)
        if next.timeIntervalSince(time) < window {
          due.append(
            .ocsp(
              url: stored.url, request: stored.request, certID: certID, leaf: stored.leaf,
              issuer: stored.issuer))
        }
      }
      return due
    }
  }

  public var answers: [(Digest256, StoredAnswer)] { state.withLock { $0.answers.map { ($0.key, $0.value) } } }

  /// The key a fetch's failure is remembered under.
  public static func key(_ fetch: RevocationFetch) -> String {
    switch fetch {
    case .crl(let url, _): return "crl " + url
    case .ocsp(_, _, let certID, _, _): return "ocsp " + certID.base64
    }
  }

  /// Why the last fetch of `key` failed, while its backoff lasts.
  public func failure(_ key: String, at time: Date) -> String? {
    state.withLock { state in
      guard let failure = state.failures[key], time < failure.until else { return nil }
      return failure.why
    }
  }

  public func recordFailure(_ key: String, _ why: String, at time: Date) {
    state.withLock { state in
      if state.failures.count >= Self.maximumFailures {
        state.failures = state.failures.filter { time < $0.value.until }
        if state.failures.count >= Self.maximumFailures, let any = state.failures.keys.first {
          state.failures[any] = nil
        }
      }
      state.failures[key] = (why, time.addingTimeInterval(Self.failureBackoff))
    }
    // No bump: a decision that waited for this fetch was never cached, and
    // one made without it holds a minute at most (`RevocationCheck.missingRecheck`).
  }

  /// Stores a CRL fetched from `url`. A CRL that would replace one already
  /// held must come from the same issuer, be no older, and verify under the
  /// key that verified the one it replaces; otherwise the old one is kept
  /// and the reason returned.
  @discardableResult
  public func store(_ crl: CertificateRevocationList, from url: String, at time: Date) -> String? {
    if let defect = crl.defect { return defect }
    let refused: String? = state.withLock { state in
      if let old = state.crls[url] {
        if old.crl.issuerName != crl.issuerName { return "it is from \(crl.issuer), not \(old.crl.issuer)" }
        if crl.thisUpdate < old.crl.thisUpdate { return "it is older than the CRL held" }
        if let issuer = old.crl.verifiedIssuer, let problem = crl.check(signedBy: issuer) { return problem }
        state.crlBytes -= old.crl.der.count
      }
      while state.crls[url] == nil,
        state.crls.count >= Self.maximumCRLs || state.crlBytes + crl.der.count > Self.maximumCRLBytes,
        let oldest = state.crls.values.min(by: { $0.fetchedAt < $1.fetchedAt })
      {
        state.crls[oldest.url] = nil
        state.crlBytes -= oldest.crl.der.count
      }
      state.crls[url] = StoredCRL(url: url, crl: crl, fetchedAt: time)
      state.crlBytes += crl.der.count
      state.failures["crl " + url] = nil
      return nil
    }
    if refused == nil { bump() }
    return refused
  }

  /// Stores an answer already verified for its certificate (`finding`).
  /// It replaces one held only when it is at least as new, and never turns
  /// a revocation back into "good" (a held certificateHold may be lifted).
  /// - Returns: why the held answer was kept, nil when stored.
  @discardableResult
  public func store(
    answer der: [UInt8], finding: RevocationFinding, for fetch: RevocationFetch, at time: Date
  ) -> String? {
    guard case .ocsp(let url, _, let certID, let leaf, let issuer) = fetch else { return "not an OCSP fetch" }
    let revoked: Bool
    switch finding.verdict {
    case .revoked(let entry): revoked = entry.reason != "certificateHold"
    case .good, .unknown: revoked = false
    case .defective(let why): return why
    }
    let kept: String? = state.withLock { state in
      if let held = state.answers[certID] {
        if finding.thisUpdate < held.thisUpdate { return "it is older than the answer held" }
        if held.revoked && !revoked { return "the answer held says revoked" }
      } else if state.answers.count >= Self.maximumAnswers,
        let oldest = state.answers.min(by: { $0.value.fetchedAt < $1.value.fetchedAt })
      {
        state.answers[oldest.key] = nil
      }
      state.answers[certID] = StoredAnswer(
        url: url, request: fetch.request, der: der, thisUpdate: finding.thisUpdate,
        nextUpdate: finding.nextUpdate, revoked: revoked, leaf: leaf, issuer: issuer, fetchedAt: time)
      state.failures["ocsp " + certID.base64] = nil
      return nil
    }
    if kept == nil { bump() }
    return kept
  }
}
