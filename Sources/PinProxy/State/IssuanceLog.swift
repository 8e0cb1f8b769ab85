import Foundation
import PinTLS
import PinTrust

/// The certificates `pinproxy ct-hook` saw issued for pinned names with a
/// key no pin of their rule covers: `stateDirectory/ct/unpinned-issuances.json`,
/// written by the hook (one process per certificate Cert Spotter finds),
/// read by the running daemon, which judges each again under the rules in
/// force, so a reload that adds the new key as a pin clears the warning.
///
/// Bounded: at most `maximumEntries` sightings (the oldest go first), each
/// with at most `maximumNames` names of at most 253 bytes, one per
/// certificate (`identity`); the file is read up to `maximumFileBytes`.
/// The file is the hook's input as much as the daemon's, so it is read as
/// hostile: an entry that does not parse is skipped, never trusted.
public enum IssuanceLog {
  public static let maximumEntries = 256
  public static let maximumNames = 100
  public static let maximumFileBytes = 1 << 20

  public static func path(stateDirectory: String) -> String { stateDirectory + "/ct/unpinned-issuances.json" }

  /// The sightings in the file, oldest first; none when there is no file.
  public static func read(_ path: String) throws(StoreError) -> [IssuanceSighting] {
    guard FileManager.default.fileExists(atPath: path) else { return [] }
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(path, limit: maximumFileBytes)
    } catch {
      throw StoreError("\(path): \(error.description)")
    }
    guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
      let entries = object["sightings"] as? [Any]
    else { throw StoreError("\(path): not a pinproxy sightings file ({\"sightings\": [...]})") }
    return entries.suffix(maximumEntries).compactMap { ($0 as? [String: Any]).flatMap(decode) }
  }

  /// Adds `sighting` unless the file holds the same certificate already;
  /// returns whether it was added. The file is locked for the change and
  /// replaced whole (written beside it, then renamed), so the daemon never
  /// reads half of it. A file that is not a sightings file is moved aside
  /// (`.bad`) rather than overwritten or left to block every later sighting.
  @discardableResult
  public static func record(_ sighting: IssuanceSighting, in path: String) throws(StoreError) -> Bool {
    let directory = (path as NSString).deletingLastPathComponent
    do {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    } catch {
      throw StoreError("\(directory): cannot create it (\(error.localizedDescription))")
    }
    let lock = open(directory + "/.lock", O_CREAT | O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW, 0o644)
    guard lock >= 0 else { throw StoreError("\(directory)/.lock: \(String(cString: strerror(errno)))") }
    defer { close(lock) }
    var lockStatus = stat()
    if fstat(lock, &lockStatus) == 0, let kind = BoundedFile.kind(of: lockStatus.st_mode) {
      throw StoreError("\(directory)/.lock: it is \(kind), not a regular file; remove it")
    }
    flock(lock, LOCK_EX)
    // Something other than a file where the sightings belong (a FIFO would
    // block a reader for good) is refused, never moved aside or read.
    var status = stat()
    if stat(path, &status) == 0, let kind = BoundedFile.kind(of: status.st_mode) {
      throw StoreError("\(path): it is \(kind), not a regular file; remove it")
    }
    var sightings: [IssuanceSighting]
    do {
      sightings = try read(path)
    } catch {
      _ = rename(path, path + ".bad")
      sightings = []
    }
    guard !sightings.contains(where: { $0.identity == sighting.identity }) else { return false }
    sightings.append(sighting)
    if sightings.count > maximumEntries { sightings.removeFirst(sightings.count - maximumEntries) }
    let document: [String: Any] = ["sightings": sightings.map(encode)]
    guard
      let data = try? JSONSerialization.data(
        withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    else { throw StoreError("\(path): the sightings could not be encoded") }
    let temporary = path + ".tmp"
    guard FileManager.default.createFile(atPath: temporary, contents: data) else {
      throw StoreError("\(temporary): cannot write it")
    }
    guard rename(temporary, path) == 0 else {
      throw StoreError("\(path): cannot replace it (\(String(cString: strerror(errno))))")
    }
    return true
  }

  public struct StoreError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
  }

  static func encode(_ sighting: IssuanceSighting) -> [String: Any] {
    var entry: [String: Any] = [
      "names": sighting.names, "spkiPin": SPKIPin.format(sighting.leafKey),
      "certificateSHA256": sighting.certificate.lowercaseHex, "identity": sighting.identity.lowercaseHex,
      "issuerCertificates": sighting.issuerCertificates.map(\.lowercaseHex), "issuer": sighting.issuer,
      "seen": timestamp(sighting.seen),
    ]
    entry["issuerKeys"] = sighting.issuerKeys.map { $0.map(SPKIPin.format) } ?? NSNull()
    if let notBefore = sighting.notBefore { entry["notBefore"] = timestamp(notBefore) }
    if let notAfter = sighting.notAfter { entry["notAfter"] = timestamp(notAfter) }
    return entry
  }

  static func decode(_ entry: [String: Any]) -> IssuanceSighting? {
    guard let names = entry["names"] as? [String], names.count <= maximumNames,
      names.allSatisfy({ $0.utf8.count <= 253 }),
      let key = (entry["spkiPin"] as? String).flatMap({ try? SPKIPin.parse($0) }),
      let certificate = (entry["certificateSHA256"] as? String).flatMap(Digest256.init(hex:)),
      let identity = (entry["identity"] as? String).flatMap(Digest256.init(hex:)),
      let seen = (entry["seen"] as? String).flatMap(date)
    else { return nil }
    var issuerKeys: [Digest256]?
    if let keys = entry["issuerKeys"] as? [String] {
      issuerKeys = keys.prefix(16).compactMap { try? SPKIPin.parse($0) }
    }
    let issuerCertificates = ((entry["issuerCertificates"] as? [String]) ?? []).prefix(16).compactMap(
      Digest256.init(hex:))
    return IssuanceSighting(
      names: names, leafKey: key, certificate: certificate, identity: identity, issuerKeys: issuerKeys,
      issuerCertificates: Array(issuerCertificates),
      issuer: String(((entry["issuer"] as? String) ?? "").prefix(1024)),
      notBefore: (entry["notBefore"] as? String).flatMap(date),
      notAfter: (entry["notAfter"] as? String).flatMap(date), seen: seen)
  }

  static func timestamp(_ date: Date) -> String { date.formatted(.iso8601) }

  static func date(_ text: String) -> Date? { try? Date(text, strategy: .iso8601) }
}
