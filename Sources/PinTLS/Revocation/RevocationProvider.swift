import Foundation
import PinTrust
import Synchronization

/// The `RevocationSource` of one compiled policy: the CRLs its anchor sets
/// supply, and (in the daemon) what was fetched. It decodes and verifies;
/// `RevocationCheck` decides. Runs only when the fingerprint cache misses.
public final class RevocationProvider: RevocationSource {
  public let crls: CRLSet
  public let fetched: FetchedRevocation?
  let counters: RevocationCounters?

  public init(crls: CRLSet, fetched: FetchedRevocation? = nil, counters: RevocationCounters? = nil) {
    self.crls = crls
    self.fetched = fetched
    self.counters = counters
  }

  /// Keys the fingerprint cache: the fetched information's generation.
  public var generation: UInt64 { fetched?.generation ?? 0 }

  public func evidence(
    for path: [Certificate], staple: [UInt8]?, settings: RevocationSettings, fetching: Bool, at time: Date
  ) -> PathRevocationEvidence {
    var parsed: [X509Certificate] = []
    for certificate in path {
      guard let x509 = try? X509Certificate(der: certificate.der) else { break }
      parsed.append(x509)
    }
    var evidence = PathRevocationEvidence()
    guard let leaf = parsed.first else { return evidence }
    let leafPointers = RevocationPointers(leaf)
    evidence.mustStaple = leafPointers.mustStaple
    let issuer = parsed.count > 1 ? parsed[1] : nil

    if let staple {
      evidence.staple =
        issuer.map { OCSPResponseCheck.finding(staple, leaf: leaf, issuer: $0, origin: .staple) }
        ?? .defective(.staple, "the leaf's issuer is not on the path")
      counters?.count(evidence.staple!)
    }

    for index in parsed.indices.dropLast() {
      let certificate = parsed[index]
      let pointers = index == 0 ? leafPointers : RevocationPointers(certificate)
      var findings: [RevocationFinding] = []
      for entry in crls.crls(issuedBy: certificate.issuerName)
      where entry.crl.covers(certificate, pointers: pointers) {
        findings.append(finding(entry.crl, origin: .crlFile(entry.path), certificate, parsed[index + 1]))
      }
      var states: [FetchState] = []
      if settings.crl != .off {
        for url in pointers.crlURLs {
          if let stored = fetched?.crl(at: url),
            stored.crl.nextUpdate.map({ time <= $0.addingTimeInterval(RevocationCheck.skew) }) ?? false
          {
            if stored.crl.covers(certificate, pointers: pointers) {
              findings.append(
                finding(stored.crl, origin: .distributionPoint(url), certificate, parsed[index + 1]))
            }
            continue
          }
          let fetch = RevocationFetch.crl(url: url)
          if let why = fetched?.failure(FetchedRevocation.key(fetch), at: time) {
            counters?.countUnavailable("crl")
            states.append(.failed("\(url): \(why)"))
          } else if fetching && fetched != nil {
            states.append(.wanted(fetch))
          } else {
            counters?.countUnavailable("crl")
            states.append(.failed("\(url): " + (fetched == nil ? "not fetched (offline)" : "no CRL was fetched in time")))
          }
        }
      }
      for finding in findings { counters?.count(finding) }
      evidence.crls.append(findings)
      evidence.distributionPoints.append(states)
    }

    if settings.ocsp != .off, let issuer, let url = leafPointers.ocspURLs.first,
      let request = OCSPResponseCheck.request(leaf: leaf, issuer: issuer)
    {
      evidence.responder = responder(
        url: url, request: request, leaf: leaf, issuer: issuer, fetching: fetching, at: time)
    }
    return evidence
  }

  private func finding(
    _ crl: CertificateRevocationList, origin: EvidenceOrigin, _ certificate: X509Certificate,
    _ issuer: X509Certificate
  ) -> RevocationFinding {
    if let problem = crl.defect ?? crl.check(signedBy: issuer) { return .defective(origin, problem) }
    let verdict: RevocationFinding.Verdict = crl.entry(for: certificate).map { .revoked($0) } ?? .good
    return RevocationFinding(
      origin: origin, verdict: verdict, thisUpdate: crl.thisUpdate, nextUpdate: crl.nextUpdate)
  }

  private func responder(
    url: String, request: (der: [UInt8], certID: Digest256), leaf: X509Certificate, issuer: X509Certificate,
    fetching: Bool, at time: Date
  ) -> ResponderEvidence {
    let fetch = RevocationFetch.ocsp(url: url, request: request.der, certID: request.certID)
    if let stored = fetched?.answer(for: request.certID) {
      let fresh = stored.nextUpdate.map { time <= $0.addingTimeInterval(RevocationCheck.skew) } ?? false
      if fresh || !fetching {
        let finding = OCSPResponseCheck.finding(
          stored.der, leaf: leaf, issuer: issuer, origin: .responder(url))
        counters?.count(finding)
        return .answer(finding)
      }
    }
    if let why = fetched?.failure(FetchedRevocation.key(fetch), at: time) {
      counters?.countUnavailable("ocsp")
      return .pending(.failed("\(url): \(why)"))
    }
    guard fetching, fetched != nil else {
      counters?.countUnavailable("ocsp")
      return .pending(
        .failed("\(url): " + (fetched == nil ? "not queried (offline)" : "no answer was fetched in time")))
    }
    return .pending(.wanted(fetch))
  }
}

/// `pinproxy_revocation_checks_total{source,result}`: what each evaluation's
/// revocation evidence said, by source (`crl`, `staple`, `ocsp`) and result
/// (`good`, `revoked`, `unknown`, `invalid`, `unavailable`).
public final class RevocationCounters: Sendable {
  public static let sources = ["crl", "staple", "ocsp"]
  public static let results = ["good", "revoked", "unknown", "invalid", "unavailable"]
  private let counts = Locked<[String: Int]>([:])

  public init() {}

  func count(_ finding: RevocationFinding) {
    let result: String
    switch finding.verdict {
    case .good: result = "good"
    case .revoked: result = "revoked"
    case .unknown: result = "unknown"
    case .defective: result = "invalid"
    }
    add(finding.origin.source, result)
  }

  func countUnavailable(_ source: String) { add(source, "unavailable") }

  private func add(_ source: String, _ result: String) {
    counts.withLock { $0["\(source) \(result)", default: 0] += 1 }
  }

  /// Every (source, result) pair with its count, zero included.
  public var all: [(source: String, result: String, count: Int)] {
    let snapshot = counts.withLock { $0 }
    return Self.sources.flatMap { source in
      Self.results.map { (source, $0, snapshot["\(source) \($0)"] ?? 0) }
    }
  }
}
