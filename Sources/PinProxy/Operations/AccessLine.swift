import Foundation
import PinConfig
import PinHTTP

/// One `request` log line, formatted straight into bytes on the loop.
///
/// The line has the shape every event line has (`LineLogHandler`): text
/// `TIME info request key=value…` or one JSON object, keys in the same
/// order (host, method, path, status, then the rest alphabetically), values
/// escaped by `PrintableText` — but without swift-log's metadata dictionary
/// and a sort per line, which together cost more than the request they
/// describe. Values a client chose (`method`, `host`, `path`) take the
/// escaping path whenever they hold anything but plain printable ASCII.
struct AccessLine {
  var client: String
  var method: String
  var host: String
  var path: Substring
  var status: Int
  var sent: Int
  var received: Int
  var upstreamMilliseconds: Int
  var upstreamConnection: String
  var upstreamTLS: String
  /// `http/1.1` or `h2`, on each side.
  var upstreamProtocol = "http/1.1"
  var clientProtocol = "http/1.1"
  /// The authenticated proxy user, on listeners with `proxyAuth.logUser` only.
  var user: String?
  /// The parent proxy the upstream connection went through (`parentProxies`), if any.
  var parent: String?
  /// For a client on this host: the user owning its socket and its program.
  var clientUser: String?
  var clientProgram: String?

  func formatted(_ format: LoggingConfig.Format, now: time_t = time(nil)) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(256)
    switch format {
    case .text:
      // Appended in place, keys in `LineLogHandler.order`: no field list is built.
      AccessLine.appendTime(now, to: &out)
      out.append(contentsOf: " info request".utf8)
      func field(_ key: StaticString, _ value: Value) {
        out.append(UInt8(ascii: " "))
        out.append(contentsOf: UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        out.append(UInt8(ascii: "="))
        value.appendText(to: &out)
      }
      field("host", .text(host))
      field("method", .text(method))
      field("path", .text(String(path)))
      field("status", .number(status))
      field("client", .text(client))
      if let clientProgram { field("client_program", .text(clientProgram)) }
      field("client_protocol", .text(clientProtocol))
      if let clientUser { field("client_user", .text(clientUser)) }
      if let parent { field("parent", .text(parent)) }
      field("received", .number(received))
      field("sent", .number(sent))
      field("upstream_connection", .text(upstreamConnection))
      field("upstream_ms", .number(upstreamMilliseconds))
      field("upstream_protocol", .text(upstreamProtocol))
      field("upstream_tls", .text(upstreamTLS))
      if let user { field("user", .text(user)) }
    case .json:
      // Keys in the order of the text line, after time, level and event.
      var all: [(String, Value)] = [
        ("time", .time(now)), ("level", .text("info")), ("event", .text("request")),
        ("host", .text(host)), ("method", .text(method)), ("path", .text(String(path))),
        ("status", .number(status)), ("client", .text(client)),
      ]
      if let clientProgram { all.append(("client_program", .text(clientProgram))) }
      all.append(("client_protocol", .text(clientProtocol)))
      if let clientUser { all.append(("client_user", .text(clientUser))) }
      if let parent { all.append(("parent", .text(parent))) }
      all += [
        ("received", .number(received)), ("sent", .number(sent)),
        ("upstream_connection", .text(upstreamConnection)),
        ("upstream_ms", .number(upstreamMilliseconds)), ("upstream_protocol", .text(upstreamProtocol)),
        ("upstream_tls", .text(upstreamTLS)),
      ]
      if let user { all.append(("user", .text(user))) }
      out.append(UInt8(ascii: "{"))
      for (index, (key, value)) in all.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        AccessLine.appendJSONString(key, to: &out)
        out.append(UInt8(ascii: ":"))
        value.appendJSON(to: &out)
      }
      out.append(UInt8(ascii: "}"))
    }
    out.append(UInt8(ascii: "\n"))
    return out
  }

  enum Value {
    case text(String)
    case number(Int)
    case time(time_t)

    func appendText(to out: inout [UInt8]) {
      switch self {
      case .number(let value): AccessLine.appendDecimal(value, to: &out)
      case .time(let seconds): AccessLine.appendTime(seconds, to: &out)
      case .text(let value):
        if AccessLine.isPlainToken(value) { return out.append(contentsOf: value.utf8) }
        out.append(contentsOf: LineLogHandler.quote(PrintableText.escaped(value)).utf8)
      }
    }

    func appendJSON(to out: inout [UInt8]) {
      switch self {
      case .number(let value): AccessLine.appendJSONString(String(value), to: &out)
      case .time(let seconds):
        out.append(UInt8(ascii: "\""))
        AccessLine.appendTime(seconds, to: &out)
        out.append(UInt8(ascii: "\""))
      case .text(let value):
        AccessLine.appendJSONString(
          AccessLine.isPlainToken(value) ? value : PrintableText.escaped(value), to: &out)
      }
    }
  }

  /// Printable ASCII with nothing `PrintableText` or the text quoting would
  /// change: no backslash, quote, `=` or space.
  static func isPlainToken(_ value: String) -> Bool {
    !value.isEmpty
      && value.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7f && $0 != 0x5c && $0 != 0x22 && $0 != 0x3d }
  }

  /// A JSON string; the value was escaped by `PrintableText` already, so
  /// only the quote and the backslash remain to escape (and, defensively,
  /// any control character).
  static func appendJSONString(_ value: String, to out: inout [UInt8]) {
    out.append(UInt8(ascii: "\""))
    for byte in value.utf8 {
      switch byte {
      case 0x22, 0x5c:
        out.append(UInt8(ascii: "\\"))
        out.append(byte)
      case 0x2f:
        // As JSONSerialization writes it, so both kinds of line look alike.
        out.append(contentsOf: "\\/".utf8)
      case 0x00..<0x20:
        out.append(contentsOf: "\\u00".utf8)
        out.append(hexDigit(byte >> 4))
        out.append(hexDigit(byte & 0xf))
      default:
        out.append(byte)
      }
    }
    out.append(UInt8(ascii: "\""))
  }

  /// `2026-11-24T02:35:16Z` (ISO 8601, UTC, whole seconds): the time of
  /// every log line, access and event alike.
  static func appendTime(_ seconds: time_t, to out: inout [UInt8]) {
    var parts = tm()
    var copy = seconds
    gmtime_r(&copy, &parts)
    func two(_ value: Int32) {
      out.append(UInt8(ascii: "0") + UInt8(value / 10 % 10))
      out.append(UInt8(ascii: "0") + UInt8(value % 10))
    }
    let year = Int(parts.tm_year) + 1900
    out.append(contentsOf: String(year).utf8)
    out.append(UInt8(ascii: "-"))
    two(parts.tm_mon + 1)
    out.append(UInt8(ascii: "-"))
    two(parts.tm_mday)
    out.append(UInt8(ascii: "T"))
    two(parts.tm_hour)
    out.append(UInt8(ascii: ":"))
    two(parts.tm_min)
    out.append(UInt8(ascii: ":"))
    two(parts.tm_sec)
    out.append(UInt8(ascii: "Z"))
  }

  static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
    if value < 0 { return out.append(contentsOf: String(value).utf8) }
    if value >= 10 { appendDecimal(value / 10, to: &out) }
    out.append(UInt8(ascii: "0") + UInt8(value % 10))
  }

  private static func hexDigit(_ value: UInt8) -> UInt8 {
    value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
  }

  /// `yyyy-MM-dd'T'HH:mm:ss'Z'` in UTC: the log lines' own format (`AccessLine.appendTime`).
  static func dateTime(_ date: Date) -> String {
    var out: [UInt8] = []
    AccessLine.appendTime(time_t(date.timeIntervalSince1970.rounded(.down)), to: &out)
    return String(decoding: out, as: UTF8.self)
  }
}
