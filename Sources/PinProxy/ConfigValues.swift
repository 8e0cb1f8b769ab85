import Foundation

/// Parsers for the small value syntaxes the config uses.
public enum ConfigValues {
  /// `host:port`, `[v6]:port`; nil when malformed or the port is out of range.
  public static func hostPort(_ text: String) -> HostPort? {
    let host: String
    let portText: Substring
    if text.hasPrefix("[") {
      guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else {
        return nil
      }
      host = String(text[text.index(after: text.startIndex)..<close])
      portText = text[text.index(close, offsetBy: 2)...]
    } else {
      guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
      host = String(text[..<colon])
      portText = text[text.index(after: colon)...]
    }
    guard !host.isEmpty, let port = Int(portText), (1...65535).contains(port) else { return nil }
    return HostPort(host: host, port: port)
  }

  /// `30s`, `5m`, `12h`, `7d`, or plain seconds; nil when malformed or not positive.
  static func duration(_ text: String) -> Double? {
    let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
    var number = Substring(text)
    var scale = 1.0
    if let last = text.last, let unit = units[last] {
      number = number.dropLast()
      scale = unit
    }
    guard let value = Double(number), value > 0, value.isFinite else { return nil }
    return value * scale
  }

  /// Resolves a config-relative path against the config file's directory.
  static func resolve(_ path: String, relativeTo file: String) -> String {
    if path.hasPrefix("/") { return path }
    let directory = URL(fileURLWithPath: file).deletingLastPathComponent()
    return directory.appendingPathComponent(path).standardized.path
  }
}
