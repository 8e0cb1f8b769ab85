import Foundation
import PinTrust

/// CRLs the operator supplied (`anchorSets.NAME.crls`, `evaluate --crl`),
/// found by issuer name. Immutable: a reload builds a new set.
public final class CRLSet: Sendable {
  public struct Entry: Sendable {
    public let path: String
    public let crl: CertificateRevocationList

    public init(path: String, crl: CertificateRevocationList) {
      self.path = path
      self.crl = crl
    }
  }

  public let entries: [Entry]
  private let byIssuer: [[UInt8]: [Entry]]

  public init(_ entries: [Entry]) {
    self.entries = entries
    byIssuer = Dictionary(grouping: entries, by: { $0.crl.issuerName })
  }

  public static let empty = CRLSet([])

  func crls(issuedBy name: [UInt8]) -> [Entry] { byIssuer[name] ?? [] }

  /// The union of several sets (a policy's anchor sets).
  public static func union(_ sets: [CRLSet]) -> CRLSet {
    var seen = Set<String>()
    return CRLSet(sets.flatMap(\.entries).filter { seen.insert($0.path).inserted })
  }

  public struct LoadError: Error, CustomStringConvertible {
    public let path: String
    public let problem: String
    public var description: String { "\(path): \(problem)" }
  }

  /// Reads one CRL file (DER or PEM) and refuses it for any defect it has on
  /// its own (no CRLNumber, a critical one, a delta, no nextUpdate, expired
  /// at `time`): a supplied CRL is never used silently when it cannot count.
  public static func load(_ path: String, at time: Date) throws(LoadError) -> CertificateRevocationList {
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(path, limit: CertificateRevocationList.maximumBytes)
    } catch {
      throw LoadError(path: path, problem: error.description)
    }
    let crl: CertificateRevocationList
    do {
      crl = try CertificateRevocationList(bytes: bytes)
    } catch {
      throw LoadError(path: path, problem: error.description)
    }
    if let defect = crl.defect { throw LoadError(path: path, problem: "CRL from \(crl.issuer): \(defect)") }
    if let next = crl.nextUpdate, time > next.addingTimeInterval(RevocationCheck.skew) {
      throw LoadError(
        path: path,
        problem:
          "CRL from \(crl.issuer) expired at \(RevocationCheck.instant(next)) (nextUpdate); fetch a current one"
      )
    }
    return crl
  }

  /// Checks each CRL against the anchors that may have issued it (a CRL
  /// from an intermediate is checked when a chain brings the intermediate).
  /// - Returns: the defect of each CRL an anchor issued and which does not
  ///   verify under it, as `(path, problem)`.
  public func defects(against anchors: [X509Certificate]) -> [(String, String)] {
    var found: [(String, String)] = []
    for entry in entries {
      let issuers = anchors.filter { $0.subjectName == entry.crl.issuerName }
      guard !issuers.isEmpty else { continue }
      let problems = issuers.compactMap { entry.crl.check(signedBy: $0) }
      if problems.count == issuers.count, let problem = problems.first {
        found.append((entry.path, "CRL from \(entry.crl.issuer): \(problem)"))
      }
    }
    return found
  }
}
