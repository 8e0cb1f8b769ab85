import Foundation

/// One line per event on standard error: an ISO 8601 time, a level, an event
/// name and key=value fields (values with spaces are quoted). Never given a
/// key, a passphrase or a Proxy-Authorization value.
public final class ProxyLogger: Sendable {
  public enum Level: Int, Sendable, Comparable {
    case debug, info, warning, error
    public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    var name: String { ["debug", "info", "warn", "error"][rawValue] }
  }

  public let minimum: Level
  private let lock = NSLock()

  public init(minimum: Level = .info) { self.minimum = minimum }

  public func log(_ level: Level, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
    guard level >= minimum else { return }
    var line = "\(Date().formatted(.iso8601)) \(level.name) \(event)"
    for (key, value) in fields { line += " \(key)=\(ProxyLogger.quote(value))" }
    line += "\n"
    lock.withLock { FileHandle.standardError.write(Data(line.utf8)) }
  }

  static func quote(_ value: String) -> String {
    let plain = !value.isEmpty && value.allSatisfy { !$0.isWhitespace && $0 != "\"" && $0 != "=" }
    if plain { return value }
    return "\""
      + value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
      .replacingOccurrences(of: "\n", with: "\\n") + "\""
  }
}
