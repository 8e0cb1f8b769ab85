/// ATS `NSRequiresCertificateTransparency`: counts the valid SCTs from
/// distinct known logs and refuses below the minimum (`ct-required`).
///
/// Pure: the signatures were verified by the TLS layer, which reports each
/// SCT as an `SCTObservation`; this decides what they add up to.
public enum TransparencyCheck {
  /// nil when the requirement is met; otherwise what was found.
  public static func evaluate(_ observations: [SCTObservation], requirement: TransparencyRequirement)
    -> TransparencyShortfall?
  {
    var counted: [CTLog] = []
    var notCounted: [TransparencyShortfall.Rejected] = []
    for observation in observations {
      let log = requirement.logs[observation.logID]
      switch (observation.status, log) {
      case (.valid, let log?) where log.accepts(issuedAt: observation.timestamp, via: observation.source):
        // Distinct logs: a second SCT from a log already counted adds nothing.
        if !counted.contains(where: { $0.logID == log.logID }) { counted.append(log) }
      case (.valid, let log?):
        notCounted.append(
          .init(
            observation: observation, log: log,
            why: "the log is retired; only SCTs embedded in a certificate before its retirement count"))
      case (.valid, nil), (.unknownLog, _):
        notCounted.append(.init(observation: observation, log: nil, why: "from a log not in the log list"))
      case (.invalid, _):
        notCounted.append(.init(observation: observation, log: log, why: "its signature does not verify"))
      case (.unverified, _):
        notCounted.append(.init(observation: observation, log: log, why: "it could not be verified"))
      case (.unknownVersion, _):
        notCounted.append(.init(observation: observation, log: log, why: "it is not an SCT v1"))
      }
    }
    guard counted.count < requirement.minimumSCTs else { return nil }
    return TransparencyShortfall(minimum: requirement.minimumSCTs, counted: counted, notCounted: notCounted)
  }
}

/// Too few SCTs: the facts, with the sentence built only when asked for.
public struct TransparencyShortfall: Sendable, Equatable {
  public struct Rejected: Sendable, Equatable {
    public var observation: SCTObservation
    public var log: CTLog?
    public var why: String
  }

  public var minimum: Int
  /// The distinct known logs with a valid SCT.
  public var counted: [CTLog]
  public var notCounted: [Rejected]

  public var reason: String {
    let found = counted.map { "\"\($0.description)\"" }.joined(separator: ", ")
    var text =
      "certificate transparency requires valid SCTs from at least \(minimum) distinct known logs;"
      + " found \(counted.count)" + (counted.isEmpty ? "" : " (\(found))")
    if counted.isEmpty && notCounted.isEmpty {
      text +=
        ": the server presented no SCT (embedded in the certificate, in the TLS extension or in an OCSP staple)"
    }
    if !notCounted.isEmpty {
      let listed = notCounted.prefix(8).map { rejected in
        let name =
          rejected.log.map { "\"\($0.description)\"" } ?? "log id \(rejected.observation.logID.base64)"
        return "SCT from \(name) (\(rejected.observation.source.rawValue)): \(rejected.why)"
      }
      text += "; not counted: " + listed.joined(separator: "; ")
    }
    return text
  }
}
