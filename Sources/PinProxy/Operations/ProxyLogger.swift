import Foundation
import Logging
import PinConfig
import PinHTTP

/// The proxy's event log, through swift-log: one line per event with an
/// event name and key=value fields. Callers never pass a key, a passphrase
/// or a Proxy-Authorization value; there is no field for them.
public final class ProxyLogger: Sendable {
  public enum Level: Int, Sendable, Comparable {
    case debug, info, warning, error
    public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

    var swiftLog: Logger.Level {
      switch self {
      case .debug: return .debug
      case .info: return .info
      case .warning: return .warning
      case .error: return .error
      }
    }
  }

  public let minimum: Level
  /// Whether served requests get an access line.
  public let access: Bool
  let format: LineLogHandler.Format
  private let logger: Logger
  private let sink: LogSink

  /// The logger a configuration asks for. Without an explicit format, JSON
  /// when systemd connected standard error to the journal (JOURNAL_STREAM).
  public convenience init(_ config: LoggingConfig, verbose: Bool = false) {
    let levels: [LoggingConfig.Level: Level] = [
      .debug: .debug, .info: .info, .warn: .warning, .error: .error,
    ]
    let journal = !(ProcessInfo.processInfo.environment["JOURNAL_STREAM"] ?? "").isEmpty
    self.init(
      minimum: verbose ? .debug : (levels[config.level] ?? .info),
      format: config.format ?? (journal ? .json : .text),
      access: config.access)
  }

  /// - Parameter format: `.text` for people, `.json` for collectors.
  public init(
    minimum: Level = .info, format: LineLogHandler.Format = .text, access: Bool = true,
    sink: LogSink = .standardError
  ) {
    self.minimum = minimum
    self.access = access
    self.format = format
    self.sink = sink
    var logger = Logger(label: "pinproxy") { label in LineLogHandler(label: label, format: format, sink: sink)
    }
    logger.logLevel = minimum.swiftLog
    self.logger = logger
  }

  public func log(_ level: Level, _ event: String, _ fields: KeyValuePairs<String, String> = [:]) {
    guard level >= minimum else { return }
    var metadata: Logger.Metadata = [:]
    for (key, value) in fields { metadata[key] = .string(value) }
    logger.log(level: level.swiftLog, "\(event)", metadata: metadata)
  }

  /// The same with fields gathered at run time (some present only sometimes).
  func log(_ level: Level, _ event: String, fields: [String: String]) {
    guard level >= minimum else { return }
    logger.log(level: level.swiftLog, "\(event)", metadata: fields.mapValues { .string($0) })
  }

  /// One `request` line, queued for the background writer (`LogSink`): the
  /// loop formats it and goes on.
  func access(_ line: AccessLine) {
    guard access, minimum <= .info else { return }
    sink.enqueue(line.formatted(format))
  }

  /// Access lines dropped because the writer fell behind.
  var droppedLines: Int { sink.droppedLines }
}

/// A swift-log handler writing one line per event to standard error: text
/// (`TIME LEVEL EVENT key=value …`, values quoted when they hold spaces) or a
/// JSON object per line. Fields are sorted by key (metadata is a dictionary);
/// every value is escaped by `PrintableText` first.
public struct LineLogHandler: LogHandler {
  public typealias Format = LoggingConfig.Format

  public var metadata: Logger.Metadata = [:]
  public var logLevel: Logger.Level = .info
  let format: Format
  let sink: LogSink

  public init(label: String, format: Format, sink: LogSink = .standardError) {
    self.format = format
    self.sink = sink
  }

  public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  public func log(event: LogEvent) {
    var timeBytes: [UInt8] = []
    AccessLine.appendTime(Glibc.time(nil), to: &timeBytes)
    let time = String(decoding: timeBytes, as: UTF8.self)
    let message = PrintableText.escaped("\(event.message)")
    let fields = (event.metadata ?? [:]).merging(metadata) { explicit, _ in explicit }
    // Metadata is a dictionary: sort for stable lines. Values may hold what
    // a client sent: escaped in both formats (`PrintableText`).
    let ordered = fields.sorted { $0.key < $1.key }.map { ($0.key, PrintableText.escaped("\($0.value)")) }
    let line: String
    switch format {
    case .text:
      line =
        "\(time) \(Self.levelName(event.level)) \(message)"
        + ordered.map { " \($0.0)=\(Self.quote($0.1))" }.joined() + "\n"
    case .json:
      var object: [String: String] = [
        "time": time, "level": Self.levelName(event.level), "event": message,
      ]
      for (key, value) in ordered where object[key] == nil { object[key] = value }
      let data =
        (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
      line = String(decoding: data, as: UTF8.self) + "\n"
    }
    sink.writeNow(Array(line.utf8))
  }

  static func levelName(_ level: Logger.Level) -> String {
    switch level {
    case .trace, .debug: return "debug"
    case .info, .notice: return "info"
    case .warning: return "warn"
    case .error, .critical: return "error"
    }
  }

  /// Quotes a value (already escaped by `PrintableText`, so it holds no
  /// control characters and every backslash is doubled) when it has spaces,
  /// quotes or `=`.
  static func quote(_ value: String) -> String {
    let plain = !value.isEmpty && value.allSatisfy { !$0.isWhitespace && $0 != "\"" && $0 != "=" }
    if plain { return value }
    return "\"" + value.replacingOccurrences(of: "\"", with: "\\\"") + "\""
  }
}
