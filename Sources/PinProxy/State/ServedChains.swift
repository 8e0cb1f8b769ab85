import Foundation
import PinTLS
import PinTrust

/// The chain each pinned rule last accepted, kept in
/// `stateDirectory/served-chains.json` so that `pinproxy check` (another
/// process, with no daemon to ask) can judge pin health against what the
/// origin serves: which configured pins sit on certificates in service and
/// which are held back for the next key. Written by the daemon when a rule
/// accepts a chain it had not (at most every `ServedChainRecorder.interval`);
/// read bounded, each certificate parsed as untrusted input.
public enum ServedChains {
  public static let maximumFileBytes = 4 << 20
  public static let maximumChainLength = 10

  public struct Entry: Sendable {
    public var chain: [Certificate]
    public var seen: Date
  }

  public static func path(stateDirectory: String) -> String { stateDirectory + "/served-chains.json" }

  /// The entries by rule name; none when there is no file or it cannot be read.
  public static func read(_ path: String) -> [String: Entry] {
    guard let bytes = try? BoundedFile.read(path, limit: maximumFileBytes),
      let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
      let rules = object["rules"] as? [String: Any]
    else { return [:] }
    var entries: [String: Entry] = [:]
    for (rule, value) in rules {
      guard let entry = value as? [String: Any], let encoded = entry["chain"] as? [String],
        encoded.count <= maximumChainLength,
        let seen = (entry["seen"] as? String).flatMap({ try? Date($0, strategy: .iso8601) })
      else { continue }
      let chain = encoded.compactMap { text -> Certificate? in
        guard let der = Base64.decode(text) else { return nil }
        return try? X509Certificate(der: der).value()
      }
      if chain.count == encoded.count, !chain.isEmpty { entries[rule] = Entry(chain: chain, seen: seen) }
    }
    return entries
  }

  /// Replaces the file (written beside it, then renamed).
  static func write(_ entries: [String: Entry], to path: String) -> Bool {
    var rules: [String: Any] = [:]
    for (rule, entry) in entries {
      rules[rule] = [
        "seen": entry.seen.formatted(.iso8601),
        "chain": entry.chain.prefix(maximumChainLength).map { Base64.encode($0.der) },
      ]
    }
    guard let data = try? JSONSerialization.data(withJSONObject: ["rules": rules], options: [.sortedKeys])
    else {
      return false
    }
    let directory = (path as NSString).deletingLastPathComponent
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    let temporary = path + ".tmp"
    return FileManager.default.createFile(atPath: temporary, contents: data) && rename(temporary, path) == 0
  }
}
