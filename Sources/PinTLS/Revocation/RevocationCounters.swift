import PinTrust

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
