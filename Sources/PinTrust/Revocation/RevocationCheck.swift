import Foundation

/// What revocation information decided about a path the policy accepted.
public enum RevocationVerdict: Sendable, Equatable {
  /// Nothing revokes the path. The acceptance holds until `validUntil` at
  /// most (the earliest nextUpdate of what it relied on); `softFailure` says
  /// which inconclusive OCSP check `softFail` let through.
  case passed(validUntil: Date, softFailure: String?)
  case refused(TrustFailure)
  /// The network could tell more: fetch these, then decide again without fetching.
  case needs([RevocationFetch])
}

/// The revocation step of a rule's decision (docs/TRUST.md,
/// "Revocation"), composed after the chain, pin and identity checks: it can
/// only refuse what they accepted.
///
/// - Evidence at hand always counts: a valid staple or CRL (supplied or
///   fetched) that lists a certificate refuses it (`revoked`), whatever the
///   rule's settings.
/// - A must-staple leaf (RFC 7633), or a rule with `stapledOCSP: require`,
///   needs a valid "good" staple (`revocation-unknown`).
/// - `crl: require` needs a valid CRL for every certificate below the anchor;
///   `ocsp: hardFail` a conclusive answer for the leaf.
///
/// Pure: no I/O, no clock of its own.
public enum RevocationCheck {
  /// How far a CA's clock may be ahead of ours (thisUpdate) or our clock
  /// past its nextUpdate.
  public static let skew: TimeInterval = 300
  /// An OCSP answer without nextUpdate is fresh this long after thisUpdate.
  public static let undatedAnswerLifetime: TimeInterval = 3600
  /// A decision that went ahead without information the rule looks for is
  /// made again this soon, so a CRL or answer that arrives later counts.
  public static let missingRecheck: TimeInterval = 60

  /// - Parameter anchored: the path verified to its anchor (the last
  ///   certificate, not examined); false examines every certificate.
  public static func evaluate(
    path: [Certificate], evidence: PathRevocationEvidence, settings: RevocationSettings,
    anchored: Bool = true,
    at time: Date
  ) -> RevocationVerdict {
    guard let leaf = path.first else { return .passed(validUntil: .distantFuture, softFailure: nil) }
    var horizon = Date.distantFuture
    var wanted: [RevocationFetch] = []

    // The staple: revoked refuses at once; good may stand in for a query.
    var stapleGood = false
    var stapleProblem = "the server stapled no OCSP response"
    if let staple = evidence.staple {
      switch judge(staple, at: time) {
      case .valid(.good):
        stapleGood = true
        horizon = min(horizon, expiry(of: staple))
      case .valid(.revoked(let entry)):
        return .refused(.revoked(leaf, entry, by: staple.origin))
      case .valid(.unknown):
        stapleProblem = "the stapled OCSP response says the responder does not know the certificate"
      case .valid(.defective(let why)), .unusable(let why):
        stapleProblem = "the stapled OCSP response is not valid: \(why)"
      }
    }

    // CRLs for every certificate below the anchor.
    for index in anchored ? path.indices.dropLast() : path.indices {
      let certificate = path[index]
      var covered = false
      var defects: [String] = []
      var suppliedDefect: String?
      for finding in index < evidence.crls.count ? evidence.crls[index] : [] {
        switch judge(finding, at: time) {
        case .valid(.revoked(let entry)):
          return .refused(.revoked(certificate, entry, by: finding.origin))
        case .valid(.good):
          covered = true
          horizon = min(horizon, expiry(of: finding))
        case .valid(.unknown):
          break
        case .valid(.defective(let why)), .unusable(let why):
          defects.append("\(finding.origin): \(why)")
          if finding.origin.isSupplied && suppliedDefect == nil {
            suppliedDefect = "\(finding.origin): \(why)"
          }
        }
      }
      if covered { continue }
      // A CRL the operator supplied is never ignored silently.
      if let suppliedDefect {
        return .refused(
          .revocationUnknown(certificate, "the CRL for its issuer cannot be used: \(suppliedDefect)"))
      }
      guard settings.crl != .off else { continue }
      let states = index < evidence.distributionPoints.count ? evidence.distributionPoints[index] : []
      var failures = defects
      for state in states {
        switch state {
        case .wanted(let fetch): wanted.append(fetch)
        case .failed(let why): failures.append(why)
        }
      }
      if states.contains(where: { if case .wanted = $0 { true } else { false } }) { continue }
      if settings.crl == .require {
        let detail =
          failures.isEmpty ? "it names no CRL distribution point" : failures.joined(separator: "; ")
        return .refused(
          .revocationUnknown(certificate, "no valid CRL from its issuer (crl: require): \(detail)"))
      }
      horizon = min(horizon, time.addingTimeInterval(missingRecheck))
    }

    if !stapleGood && (evidence.mustStaple || settings.stapledOCSP == .require) {
      let rule =
        evidence.mustStaple
        ? "the leaf requires a stapled OCSP response (TLS Feature status_request, RFC 7633)"
        : "the rule requires a stapled OCSP response (stapledOCSP: require)"
      return .refused(.revocationUnknown(leaf, "\(rule); \(stapleProblem)"))
    }

    // A held answer that validly says revoked refuses, whatever the staple
    // says; a good staple stands in for a query.
    var softFailure: String?
    if settings.ocsp != .off {
      var inconclusive: String?
      switch evidence.responder {
      case .answer(let answer):
        switch judge(answer, at: time) {
        case .valid(.revoked(let entry)): return .refused(.revoked(leaf, entry, by: answer.origin))
        case .valid(.good): if !stapleGood { horizon = min(horizon, expiry(of: answer)) }
        case .valid(.unknown): inconclusive = "\(answer.origin) does not know the certificate"
        case .valid(.defective(let why)), .unusable(let why):
          inconclusive = "\(answer.origin) gave no valid answer: \(why)"
        }
      case .pending(.wanted(let fetch)): if !stapleGood { wanted.append(fetch) }
      case .pending(.failed(let why)): inconclusive = why
      case nil: inconclusive = "the leaf names no OCSP responder"
      }
      if let inconclusive, !stapleGood {
        if settings.ocsp == .hardFail {
          return .refused(
            .revocationUnknown(leaf, "no conclusive OCSP answer (ocsp: hardFail): \(inconclusive)"))
        }
        // Accepted without an OCSP answer only because the rule says
        // `ocsp: softFail`; the acceptance names what was missing.
        softFailure = inconclusive
        horizon = min(horizon, time.addingTimeInterval(missingRecheck))
      }
    }

    if !wanted.isEmpty { return .needs(wanted) }
    return .passed(validUntil: horizon, softFailure: softFailure)
  }

  /// The finding's verdict when its dates hold at `time`; otherwise why not.
  enum Judgement {
    case valid(RevocationFinding.Verdict)
    case unusable(String)
  }

  static func judge(_ finding: RevocationFinding, at time: Date) -> Judgement {
    if case .defective = finding.verdict { return .valid(finding.verdict) }
    if finding.thisUpdate > time.addingTimeInterval(skew) {
      return .unusable("it is dated \(instant(finding.thisUpdate)), in the future (thisUpdate)")
    }
    let end = expiry(of: finding)
    if time > end.addingTimeInterval(skew) {
      return .unusable("it expired at \(instant(end)) (nextUpdate)")
    }
    return .valid(finding.verdict)
  }

  /// Whether information with this nextUpdate may still be used at `time`
  /// without asking again (none: it may not).
  public static func isCurrent(nextUpdate: Date?, at time: Date) -> Bool {
    nextUpdate.map { time <= $0.addingTimeInterval(skew) } ?? false
  }

  static func expiry(of finding: RevocationFinding) -> Date {
    finding.nextUpdate ?? finding.thisUpdate.addingTimeInterval(undatedAnswerLifetime)
  }

  /// `2026-01-01T00:00:00Z`.
  public static func instant(_ date: Date) -> String {
    let seconds = Int64(date.timeIntervalSince1970.rounded(.down))
    let inDay = ((seconds % 86_400) + 86_400) % 86_400
    func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(TrustFailure.day(date))T\(two(inDay / 3600)):\(two(inDay / 60 % 60)):\(two(inDay % 60))Z"
  }
}
