import Foundation

/// A pin list as received (or stored, or configured as a fallback), parsed
/// but not yet verified. The parser is strict about what it reads: a field
/// of the wrong type or value fails the whole document, so an update is all
/// or nothing. Unknown fields are ignored (newer servers add some).
public struct PinListDocument: Sendable, Equatable {
  public var entries: [PinListEntry]
  /// Challenge mode: when the server produced the list (seconds since the epoch).
  public var timestamp: Int64?
  /// Challenge mode: the optional `domainsConfig` (shown to operators; see
  /// `DynamicPinCheck` on why it never relaxes a rule).
  public var domainsConfig: DomainsConfig?
  /// Written by the store only: when this process accepted the list.
  public var updated: Int64?

  public struct DomainsConfig: Sendable, Equatable, Codable {
    public struct Domain: Sendable, Equatable, Codable {
      public var name: String
      public var sslPinningRequired: Bool?
    }
    public var sslPinningRequiredForUnlisted: Bool?
    public var domains: [Domain]?
  }

  public init(entries: [PinListEntry], timestamp: Int64? = nil, domainsConfig: DomainsConfig? = nil) {
    self.entries = entries
    self.timestamp = timestamp
    self.domainsConfig = domainsConfig
  }

  public struct ParseError: Error, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
  }

  /// The largest list accepted, in entries: far above any real list, and a
  /// bound on the work one document can cause.
  public static let maximumEntries = 4096

  private struct Wire: Codable {
    struct Entry: Codable {
      var name: String
      var fingerprint: String
      var expires: Int64
      var signature: String?
      var depth: Int?
    }
    var fingerprints: [Entry]
    var timestamp: Int64?
    var domainsConfig: DomainsConfig?
    var updated: Int64?
  }

  /// Parses `{"fingerprints":[{name, fingerprint, expires, signature?, depth?}], "timestamp"?, "domainsConfig"?}`.
  /// - Parameter signedEntries: v1 lists carry a signature per entry;
  ///   challenge-mode lists carry none (the response signature covers the body).
  public static func parse(_ bytes: [UInt8], signedEntries: Bool) throws(ParseError) -> PinListDocument {
    let wire: Wire
    do {
      wire = try JSONDecoder().decode(Wire.self, from: Data(bytes))
    } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context),
      let DecodingError.keyNotFound(_, context), let DecodingError.dataCorrupted(context)
    {
      let path = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
      throw ParseError("not a pin list\(path.isEmpty ? "" : " at \(path)"): \(context.debugDescription)")
    } catch {
      throw ParseError("not a pin list: \(error)")
    }
    guard wire.fingerprints.count <= maximumEntries else {
      throw ParseError(
        "the list has \(wire.fingerprints.count) entries; at most \(maximumEntries) are accepted")
    }
    var entries: [PinListEntry] = []
    entries.reserveCapacity(wire.fingerprints.count)
    for (index, item) in wire.fingerprints.enumerated() {
      let at = "fingerprints[\(index)]"
      guard !item.name.isEmpty else { throw ParseError("\(at).name is empty") }
      guard let fingerprint = Digest256(base64: item.fingerprint) else {
        throw ParseError("\(at).fingerprint is not base64 of a 32-byte SHA-256")
      }
      // Up to the year 9999: bounds every later date computation.
      guard (1...253_402_300_799).contains(item.expires) else {
        throw ParseError("\(at).expires is not a positive number of seconds before the year 10000")
      }
      let depth = item.depth ?? 0
      guard (0...16).contains(depth) else {
        throw ParseError("\(at).depth is not a chain position from 0 to 16")
      }
      var signature: [UInt8]?
      if signedEntries {
        guard let text = item.signature, let bytes = Base64.decode(text), !bytes.isEmpty else {
          throw ParseError("\(at).signature is missing or not base64")
        }
        signature = bytes
      }
      entries.append(
        PinListEntry(
          name: item.name, fingerprint: fingerprint,
          expires: Date(timeIntervalSince1970: Double(item.expires)),
          depth: depth, signature: signature))
    }
    var document = PinListDocument(
      entries: entries, timestamp: wire.timestamp, domainsConfig: wire.domainsConfig)
    document.updated = wire.updated
    return document
  }

  /// The document as the store writes it (entries, signatures when present,
  /// timestamp and domainsConfig): `parse` reads it back.
  public func json() -> [UInt8] {
    let wire = Wire(
      fingerprints: entries.map { entry in
        Wire.Entry(
          name: entry.name, fingerprint: entry.fingerprint.base64, expires: entry.expiresSeconds,
          signature: entry.signature.map { Base64.encode($0) }, depth: entry.depth == 0 ? nil : entry.depth)
      }, timestamp: timestamp, domainsConfig: domainsConfig, updated: updated)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    return Array((try? encoder.encode(wire)) ?? Data("{}".utf8))
  }
}
