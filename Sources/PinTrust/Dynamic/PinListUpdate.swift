import Foundation

/// The update rules of a dynamic pin list (docs/TRUST.md, dynamic
/// pinning), applied to a parsed document. Pure: the signature check is a
/// parameter and `time` is the instant of the update.
///
/// Two choices differ from the Wultra libraries, on purpose:
/// - A verified update **replaces** the list. The libraries only ever append,
///   so an entry the server withdrew (a compromised key) stays trusted until
///   its own expiry; here the server's current list is the list.
/// - In challenge mode a `timestamp` older than the stored list's is refused
///   as a rollback: a replayed or stale mirror cannot bring back withdrawn
///   entries. (v1 lists carry no list-wide timestamp, so this check exists
///   only in challenge mode; prefer challenge mode where rollback matters.)
///
/// An update whose every entry has expired is refused too: a server that
/// publishes nothing usable is more likely broken than revoking everything,
/// and the stored entries expire on their own.
public enum PinListUpdate {
  public struct Outcome: Sendable, Equatable {
    public var list: PinList
    /// Entries whose name is outside `expectedCommonNames`: kept, but warned
    /// about (they can never match, since such a leaf is refused first).
    public var unexpectedNames: [String]
    /// Received entries skipped because they had expired.
    public var expiredSkipped: Int
    /// Received entries skipped because they repeated an earlier one.
    public var duplicatesSkipped: Int
  }

  public struct Rejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// A short stable word for metrics: `signature`, `rollback`, `empty`.
    public let reason: String
    public let description: String
  }

  /// - Parameters:
  ///   - verifier: checks v1 per-entry signatures; nil in challenge mode,
  ///     where the caller has verified the response signature over the body.
  ///   - stored: the list in force, for the rollback check.
  public static func apply(
    _ document: PinListDocument, verifier: (any PinSignatureVerifier)?, expectedCommonNames: [String],
    stored: PinList, at time: Date
  ) -> Result<Outcome, Rejection> {
    if let received = document.timestamp, let floor = stored.timestamp, stored.source != .fallback,
      received < floor
    {
      return .failure(
        Rejection(
          reason: "rollback",
          description:
            "the list's timestamp \(received) is older than the stored list's \(floor); refused as a rollback"
        ))
    }
    var accepted: [PinListEntry] = []
    var expired = 0
    var duplicates = 0
    var unexpected: [String] = []
    for (index, entry) in document.entries.enumerated() {
      if entry.isExpired(at: time) {
        expired += 1
        continue
      }
      if accepted.contains(where: { $0.sameEntry(as: entry) }) {
        duplicates += 1
        continue
      }
      if let verifier {
        guard let signature = entry.signature,
          verifier.isValid(signature: signature, over: entry.signedMessage)
        else {
          return .failure(
            Rejection(
              reason: "signature",
              description:
                "entry \(index) (\(entry.name), \(entry.fingerprint.base64)) has a bad signature; the whole update is refused"
            ))
        }
      }
      if !expectedCommonNames.isEmpty && !expectedCommonNames.contains(entry.name)
        && !unexpected.contains(entry.name)
      {
        unexpected.append(entry.name)
      }
      accepted.append(entry)
    }
    guard !accepted.isEmpty else {
      return .failure(
        Rejection(
          reason: "empty",
          description:
            "the list has no unexpired entries (\(document.entries.count) received, \(expired) expired); the stored list stays"
        ))
    }
    let list = PinList(
      entries: accepted, source: .fetched, timestamp: document.timestamp ?? stored.timestamp,
      domainsConfig: document.domainsConfig, updated: time)
    return .success(
      Outcome(list: list, unexpectedNames: unexpected, expiredSkipped: expired, duplicatesSkipped: duplicates)
    )
  }

  /// A fallback file's entries: no signatures checked (the file is local
  /// configuration), expired ones dropped.
  public static func fallback(_ document: PinListDocument, at time: Date) -> PinList {
    PinList(entries: document.entries.filter { !$0.isExpired(at: time) }, source: .fallback)
  }
}
