import Foundation

/// One certificate transparency log the proxy knows, from the operator's
/// log list (the browser vendors' JSON, schema v3).
public struct CTLog: Sendable, Equatable {
  /// The log's lifecycle state in the list. Pending and rejected logs are
  /// never loaded, so their SCTs count as from an unknown log.
  public enum State: Sendable, Equatable {
    case usable
    case qualified
    case readonly
    /// Retired at this instant: an SCT counts only if it was issued before.
    case retired(Date)
  }

  /// SHA-256 of the log's DER public key (RFC 6962 §3.2 LogID).
  public var logID: Digest256
  public var description: String
  public var operatorName: String
  public var state: State

  public init(logID: Digest256, description: String, operatorName: String, state: State) {
    self.logID = logID
    self.description = description
    self.operatorName = operatorName
    self.state = state
  }

  /// Whether an SCT this log issued at `timestamp`, delivered through
  /// `source`, is one to count. A retired log's SCTs count only when issued
  /// before the retirement and embedded in the certificate (as in Chrome's
  /// policy): an SCT in the TLS extension or a staple can be produced at
  /// any time by whoever holds a retired log's key, a timestamp proves nothing.
  public func accepts(issuedAt timestamp: Date, via source: SCTObservation.Source) -> Bool {
    if case .retired(let retiredAt) = state { return source == .embedded && timestamp < retiredAt }
    return true
  }
}

/// What the TLS layer found for one signed certificate timestamp: where it
/// came from, which log it names, and whether its signature verified
/// against that log's key over the certificate (RFC 6962 §3.2).
public struct SCTObservation: Sendable, Equatable {
  /// The three channels of RFC 6962 §3.3.
  public enum Source: String, Sendable {
    case embedded = "embedded in the certificate"
    case tlsExtension = "TLS extension"
    case ocspStaple = "OCSP staple"
    case unknown = "unknown source"
  }

  public enum Status: Sendable, Equatable {
    case valid
    /// The signature does not verify over this certificate.
    case invalid
    /// No known log has this log ID.
    case unknownLog
    /// It could not be checked (no issuer for an embedded SCT, for example).
    case unverified
    /// Not an SCT v1.
    case unknownVersion
  }

  public var logID: Digest256
  public var timestamp: Date
  public var source: Source
  public var status: Status

  public init(logID: Digest256, timestamp: Date, source: Source, status: Status) {
    self.logID = logID
    self.timestamp = timestamp
    self.source = source
    self.status = status
  }
}

/// A rule's transparency requirement (`requiresCertificateTransparency`
/// with the top-level `certificateTransparency`): at least `minimumSCTs`
/// valid SCTs from distinct logs of `logs`.
public struct TransparencyRequirement: Sendable {
  public var minimumSCTs: Int
  public var logs: [Digest256: CTLog]

  public init(minimumSCTs: Int, logs: [CTLog]) {
    self.minimumSCTs = minimumSCTs
    var table: [Digest256: CTLog] = [:]
    for log in logs { table[log.logID] = log }
    self.logs = table
  }
}
