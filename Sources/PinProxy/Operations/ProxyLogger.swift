import Foundation
import Logging
import PinConfig
import PinHTTP
import Synchronization

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
  /// `logging.queryStrings`: whether paths keep their query in log lines
  /// and on the operator's page. A reload sets it (`setQueryStrings`).
  private let queryStrings: Atomic<Bool>
  public var showsQueryStrings: Bool { queryStrings.load(ordering: .relaxed) }
  public func setQueryStrings(_ shown: Bool) { queryStrings.store(shown, ordering: .relaxed) }

  /// `path` as log lines and the operator's page show it: without its query
  /// (`?` and after, where tokens travel) unless `logging.queryStrings`.
  func shownPath(_ path: Substring) -> Substring {
    guard !showsQueryStrings, let mark = path.utf8.firstIndex(of: UInt8(ascii: "?")) else { return path }
    return path[..<mark]
  }
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
      access: config.access, queryStrings: config.queryStrings)
  }

  /// - Parameter format: `.text` for people, `.json` for collectors.
  public init(
    minimum: Level = .info, format: LineLogHandler.Format = .text, access: Bool = true,
    queryStrings: Bool = false, sink: LogSink = .standardError
  ) {
    self.minimum = minimum
    self.access = access
    self.queryStrings = Atomic(queryStrings)
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
/// JSON object per line. Keys come in the order a person reads them
/// (`LineLogHandler.order`): time, level, event, then code, host, rule,
/// reason, method, path and status, the other fields alphabetically, and
/// the chain last (it is long). Every value is escaped by `PrintableText`.
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

  /// Fields that lead a line, in this order; `chain` closes it.
  static let leading = ["code", "host", "rule", "reason", "method", "path", "status"]

  /// Whether key `a` comes before key `b` on a line.
  static func order(_ a: String, _ b: String) -> Bool {
    func rank(_ key: String) -> Int {
      if let index = leading.firstIndex(of: key) { return index }
      return key == "chain" ? leading.count + 1 : leading.count
    }
    let (left, right) = (rank(a), rank(b))
    return left != right ? left < right : a < b
  }

  public func log(event: LogEvent) {
    var timeBytes: [UInt8] = []
    AccessLine.appendTime(Glibc.time(nil), to: &timeBytes)
    let time = String(decoding: timeBytes, as: UTF8.self)
    let message = PrintableText.escaped("\(event.message)")
    let fields = (event.metadata ?? [:]).merging(metadata) { explicit, _ in explicit }
    // Values may hold what a client sent: escaped in both formats (`PrintableText`).
    let ordered = fields.sorted { Self.order($0.key, $1.key) }.map {
      ($0.key, PrintableText.escaped("\($0.value)"))
    }
    var line: [UInt8] = []
    switch format {
    case .text:
      line = Array(
        ("\(time) \(Self.levelName(event.level)) \(message)"
          + ordered.map { " \($0.0)=\(Self.quote($0.1))" }.joined() + "\n").utf8)
    case .json:
      line.append(UInt8(ascii: "{"))
      let all =
        [("time", time), ("level", Self.levelName(event.level)), ("event", message)]
        + ordered.filter { !["time", "level", "event"].contains($0.0) }
      for (index, (key, value)) in all.enumerated() {
        if index > 0 { line.append(UInt8(ascii: ",")) }
        AccessLine.appendJSONString(key, to: &line)
        line.append(UInt8(ascii: ":"))
        AccessLine.appendJSONString(value, to: &line)
      }
      line.append(contentsOf: "}\n".utf8)
    }
    sink.writeNow(line)
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
