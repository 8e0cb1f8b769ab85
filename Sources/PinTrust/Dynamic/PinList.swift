import Foundation

/// The pin list a rule enforces, as stored: what was accepted, from where,
/// and when. A value; the store swaps whole lists.
public struct PinList: Sendable, Equatable {
  public enum Source: String, Sendable {
    /// Fetched and verified by this process.
    case fetched
    /// Read from the state directory (fetched and verified earlier).
    case stored
    /// The rule's local `fallback` file (signatures not checked), used only
    /// while nothing was ever fetched.
    case fallback
    /// Nothing at all: every connection under the rule is refused.
    case none
  }

  public var entries: [PinListEntry]
  public var source: Source
  /// Challenge mode: the accepted list's `timestamp`, the floor for the next one.
  public var timestamp: Int64?
  public var domainsConfig: PinListDocument.DomainsConfig?
  /// When the list was accepted from the server.
  public var updated: Date?

  public init(
    entries: [PinListEntry], source: Source, timestamp: Int64? = nil,
    domainsConfig: PinListDocument.DomainsConfig? = nil, updated: Date? = nil
  ) {
    self.entries = entries
    self.source = source
    self.timestamp = timestamp
    self.domainsConfig = domainsConfig
    self.updated = updated
  }

  public static let empty = PinList(entries: [], source: .none)

  /// The entries still in force at `time`.
  public func usable(at time: Date) -> [PinListEntry] { entries.filter { !$0.isExpired(at: time) } }

  /// The list's signed entries as a document (what the store writes).
  public var document: PinListDocument {
    var document = PinListDocument(entries: entries, timestamp: timestamp, domainsConfig: domainsConfig)
    document.updated = updated.map { Int64($0.timeIntervalSince1970.rounded(.down)) }
    return document
  }
}
