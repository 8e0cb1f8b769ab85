import Foundation
import PinTrust

/// The `RevocationSource` of one compiled policy: the CRLs its anchor sets
/// supply, and (in the daemon) what was fetched. It decodes and verifies;
/// `RevocationCheck` decides. Runs only when the fingerprint cache misses.
public final class RevocationProvider: RevocationSource {
  public let crls: CRLSet
  /// Distribution points of one certificate looked at (and fetched), in order.
  public static let maximumDistributionPoints = 4
  public let fetched: FetchedRevocation?
  let counters: RevocationCounters?
  /// The policy's anchors: an indirect CRL's issuer must chain to the anchor
  /// the path does (RFC 5280 §6.3.3 (f)), and may be one of the set's certificates.
  let anchors: AnchorStore?
  let anchorCertificates: [X509Certificate]

  public init(
    crls: CRLSet, fetched: FetchedRevocation? = nil, counters: RevocationCounters? = nil,
    anchors: AnchorStore? = nil, anchorCertificates: [X509Certificate] = []
  ) {
    self.crls = crls
    self.fetched = fetched
    self.counters = counters
    self.anchors = anchors
    self.anchorCertificates = anchorCertificates
  }

  /// The same provider with more supplied CRLs (`evaluate --crl`).
  public func adding(_ more: CRLSet) -> RevocationProvider {
    RevocationProvider(
      crls: CRLSet.union([crls, more]), fetched: fetched, counters: counters, anchors: anchors,
      anchorCertificates: anchorCertificates)
  }

  /// Keys the fingerprint cache: the fetched information's generation.
  public var generation: UInt64 { fetched?.generation ?? 0 }

  public func evidence(
    for path: [Certificate], anchored: Bool, staple: [UInt8]?, settings: RevocationSettings, fetching: Bool,
    at time: Date
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
        issuer.map { OCSPResponseCheck.finding(staple, leaf: leaf, issuer: $0, origin: .staple, at: time) }
        ?? .defective(.staple, "the leaf's issuer is not on the path")
      counters?.count(evidence.staple!)
    }

    // An anchored path's last certificate is its anchor; an unanchored one's
    // is examined too, with no issuer on the path to verify a CRL.
    for index in anchored ? parsed.indices.dropLast() : parsed.indices {
      let certificate = parsed[index]
      let pointers = index == 0 ? leafPointers : RevocationPointers(certificate)
      var findings: [RevocationFinding] = []
      let supplied =
        crls.crls(issuedBy: certificate.issuerName)
        + pointers.crlIssuers.flatMap { crls.crls(issuedBy: $0) }.filter(\.crl.isIndirect)
      for entry in supplied where entry.crl.covers(certificate, pointers: pointers) {
        findings.append(
          finding(
            entry.crl, origin: .crlFile(entry.path), certificate, pointers, path: parsed,
            anchor: path[parsed.count - 1].fingerprint, at: time))
      }
      var states: [FetchState] = []
      if settings.crl != .off {
        // At most the first few points, in order: one certificate naming
        // dozens cannot make one handshake send dozens of requests.
        let urls = pointers.crlURLs.prefix(Self.maximumDistributionPoints)
        for url in urls {
          if let stored = fetched?.crl(at: url),
            RevocationCheck.isCurrent(nextUpdate: stored.crl.nextUpdate, at: time)
          {
            if stored.crl.covers(certificate, pointers: pointers) {
              findings.append(
                finding(
                  stored.crl, origin: .distributionPoint(url), certificate, pointers, path: parsed,
                  anchor: path[parsed.count - 1].fingerprint, at: time))
              // The first point that yields a current CRL wins; the rest are not wanted.
              if let last = findings.last, last.verdict.verifies {
                states.removeAll()
                break
              }
            }
            continue
          }
          let fetch = RevocationFetch.crl(
            url: url, issuer: index + 1 < parsed.count ? path[index + 1].der : [])
          if let why = fetched?.failure(FetchedRevocation.key(fetch), at: time) {
            counters?.countUnavailable("crl")
            states.append(.failed("\(url): \(why)"))
          } else if fetching && fetched != nil {
            states.append(.wanted(fetch))
          } else {
            counters?.countUnavailable("crl")
            states.append(
              .failed(
                "\(url): "
                  + (fetched == nil ? "not fetched (offline)" : "no current CRL held and none fetched")))
          }
        }
        let untried = pointers.crlURLs.count - urls.count
        if untried > 0, !states.isEmpty {
          states.append(
            .failed(
              "\(untried) more distribution point\(untried == 1 ? "" : "s") not tried (at most"
                + " \(Self.maximumDistributionPoints) per certificate)"))
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
        url: url, request: request, leaf: (leaf, path[0].der), issuer: (issuer, path[1].der),
        fetching: fetching,
        at: time)
    }
    return evidence
  }

  /// What `crl` says about the certificate at `path[index]`: signed by its
  /// issuer (the next certificate of the path), or an indirect CRL from a CRL
  /// issuer the certificate names, whose own certificate chains to the
  /// path's anchor.
  private func finding(
    _ crl: CertificateRevocationList, origin: EvidenceOrigin, _ certificate: X509Certificate,
    _ pointers: RevocationPointers, path: [X509Certificate], anchor: Digest256, at time: Date
  ) -> RevocationFinding {
    let position = path.firstIndex { $0 === certificate } ?? 0
    let issuer = position + 1 < path.count ? path[position + 1] : nil
    let problem: String?
    if let defect = crl.defect {
      problem = defect
    } else if crl.issuerName == certificate.issuerName {
      problem =
        issuer.map { crl.check(signedBy: $0) } ?? "the certificate's issuer is not on the path to verify it"
    } else if crl.isIndirect && pointers.crlIssuers.contains(crl.issuerName) {
      problem = indirectIssuerProblem(crl, path: path, anchor: anchor, at: time)
    } else {
      problem = "it is issued by \(crl.issuer), neither the certificate's issuer nor a CRL issuer it names"
    }
    if let problem { return .defective(origin, problem) }
    let verdict: RevocationFinding.Verdict = crl.entry(for: certificate).map { .revoked($0) } ?? .good
    return RevocationFinding(
      origin: origin, verdict: verdict, thisUpdate: crl.thisUpdate, nextUpdate: crl.nextUpdate)
  }

  /// nil when a certificate named as the indirect CRL's issuer (from the
  /// CRL's file, the path or the anchor set) signed it, may sign CRLs, and
  /// chains, valid now, to the anchor the path ends in.
  private func indirectIssuerProblem(
    _ crl: CertificateRevocationList, path: [X509Certificate], anchor anchorFingerprint: Digest256,
    at time: Date
  ) -> String? {
    let candidates = (crl.bundled + path + anchorCertificates).filter { $0.subjectName == crl.issuerName }
    guard !candidates.isEmpty else {
      return "its issuer \(crl.issuer) is not in the CRL's file, on the path or in the anchor set"
    }
    guard let anchors else { return "no anchors to verify its issuer \(crl.issuer) against" }
    var problems: [String] = []
    for signer in candidates {
      let chain = ChainBuilder.verify(
        leaf: signer, untrusted: path + crl.bundled, store: anchors, purpose: .basicX509, at: time)
      guard chain.isValid, chain.builtChain.last?.fingerprint == anchorFingerprint else {
        problems.append("its issuer \(crl.issuer) does not chain to the path's anchor")
        continue
      }
      if chain.builtChain.contains(where: { time < $0.notBefore || time > $0.notAfter }) {
        problems.append("its issuer \(crl.issuer) is not valid now")
        continue
      }
      guard let problem = crl.check(signedBy: signer) else { return nil }
      problems.append(problem)
    }
    return problems.first
  }

  /// `leaf` and `issuer` come with their DER as the path holds it.
  private func responder(
    url: String, request: (der: [UInt8], certID: Digest256), leaf: (X509Certificate, der: [UInt8]),
    issuer: (X509Certificate, der: [UInt8]), fetching: Bool, at time: Date
  ) -> ResponderEvidence {
    let fetch = RevocationFetch.ocsp(
      url: url, request: request.der, certID: request.certID, leaf: leaf.der, issuer: issuer.der)
    // A held answer counts while it is fresh, and always when it says
    // revoked; a stale one is asked again when the network may be.
    if let stored = fetched?.answer(for: request.certID) {
      let finding = OCSPResponseCheck.finding(
        stored.der, leaf: leaf.0, issuer: issuer.0, origin: .responder(stored.url), at: time)
      let fresh = RevocationCheck.isCurrent(nextUpdate: stored.nextUpdate, at: time)
      if fresh || !fetching || stored.revoked {
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

extension RevocationFinding.Verdict {
  /// The CRL verified and speaks of the certificate (good or revoked).
  fileprivate var verifies: Bool {
    switch self {
    case .good, .revoked: true
    case .unknown, .defective: false
    }
  }
}
