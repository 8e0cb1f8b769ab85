import Foundation
import PinTrust

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

  /// The parts of an `http(s)://host[:port]/path?query` the daemon requests
  /// itself (a pin list, a report URI), or nil when it is not one. The one
  /// rule for such URLs: compiling a configuration applies it, and `pinproxy
  /// import` applies it before writing one, so that `check` accepts its output.
  public static func internalURL(_ text: String) -> (tls: Bool, host: TrustHost, port: Int, target: String)? {
    // Foundation on Linux percent-encodes what RFC 3986 §2 does not allow (a
    // quote, a space, a newline) instead of refusing it; the text is shown as
    // written (logs, /policies), so it is refused here, not repaired.
    guard text.utf8.allSatisfy({ uriCharacters.contains($0) }), let components = URLComponents(string: text),
      let scheme = components.scheme?.lowercased(), scheme == "https" || scheme == "http",
      let rawHost = components.host, let host = TrustHost(rawHost),
      components.user == nil, components.password == nil, components.fragment == nil
    else { return nil }
    let port = components.port ?? (scheme == "https" ? 443 : 80)
    guard (1...65535).contains(port) else { return nil }
    let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
    let target = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    // Only printable ASCII reaches a request line.
    guard target.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return nil }
    return (scheme == "https", host, port, target)
  }

  /// RFC 3986 §2: unreserved and reserved characters, and `%` of percent-encoding.
  static let uriCharacters = Set(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%".utf8)

  /// The longest timeout a configuration may set. Longer values have no use
  /// and, multiplied into nanoseconds, would overflow the clock arithmetic.
  public static let maximumDuration: Double = 7 * 86_400

  /// `30s`, `1.5m`, `12h`, `7d`, or plain seconds: digits with an optional
  /// fraction and unit. nil when malformed, not positive or over `maximum`.
  /// Exponents, signs, hex floats, `inf` and `nan` are refused by the syntax.
  static func duration(_ text: String, maximum: Double = maximumDuration) -> Double? {
    let units: [UInt8: Double] = [0x73: 1, 0x6d: 60, 0x68: 3600, 0x64: 86_400]
    var digits = Array(text.utf8)
    var scale = 1.0
    if let last = digits.last, let unit = units[last] {
      digits.removeLast()
      scale = unit
    }
    let dots = digits.filter { $0 == 0x2e }.count
    guard !digits.isEmpty, digits.count <= 15, dots <= 1, digits.first != 0x2e, digits.last != 0x2e,
      digits.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e }),
      let value = Double(String(decoding: digits, as: UTF8.self))
    else { return nil }
    let seconds = value * scale
    guard seconds > 0, seconds <= maximum else { return nil }
    return seconds
  }

  /// `2027-06-01` (the start of that day in UTC, as TrustKit's and
  /// Android's `yyyy-MM-dd` expiry dates are read here) or an ISO 8601
  /// instant such as `2027-06-01T12:00:00Z`.
  public static func date(_ text: String) -> Date? {
    let bytes = Array(text.utf8)
    if bytes.count == 10, bytes[4] == 0x2d, bytes[7] == 0x2d {
      let digits = bytes.enumerated().filter { $0.offset != 4 && $0.offset != 7 }.map(\.element)
      guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let year = Int(text.prefix(4)),
        let month = Int(text.dropFirst(5).prefix(2)), let day = Int(text.suffix(2)),
        (1...12).contains(month), (1...31).contains(day)
      else { return nil }
      var components = DateComponents()
      (components.year, components.month, components.day) = (year, month, day)
      var calendar = Calendar(identifier: .gregorian)
      calendar.timeZone = TimeZone(identifier: "UTC")!
      // Refuses 2027-02-30 instead of rolling it over into March.
      guard let date = calendar.date(from: components),
        calendar.dateComponents([.year, .month, .day], from: date) == components
      else { return nil }
      return date
    }
    return ISO8601DateFormatter().date(from: text)
  }

  /// Resolves a config-relative path against the directory of the config
  /// file as given (`--config`), as nginx's `include` does: whatever the
  /// working directory and however the file was named (`q.yaml`, `./q.yaml`,
  /// `../c/q.yaml`, absolute), `../x` is the `x` beside the config's
  /// directory. Foundation's `URL.standardized` is not used: on a relative
  /// file URL it drops a leading `..`, and resolved `config/../x` to `/x`.
  static func resolve(_ path: String, relativeTo file: String) -> String {
    if path.hasPrefix("/") { return path }
    // The file was opened relative to the physical working directory
    // (getcwd), so its directory is taken from there.
    let absoluteFile = file.hasPrefix("/") ? file : FileManager.default.currentDirectoryPath + "/" + file
    let directory = String(absoluteFile[..<absoluteFile.lastIndex(of: "/")!])
    // Physical, so that `..` taken off it below leads where the kernel goes
    // from a symlinked directory: the parent of the link's target.
    var resolved = components(physicalPath(directory) ?? directory)
    var rest = components(path)[...]
    while rest.first == ".." {
      rest.removeFirst()
      if !resolved.isEmpty { resolved.removeLast() }
    }
    // A `..` after a name in `path` stays, for the kernel to follow through a symlink.
    return "/" + (resolved + rest).joined(separator: "/")
  }

  /// A path's components, without empty ones (`//`, a trailing `/`) and `.`.
  private static func components(_ path: String) -> [String] {
    path.split(separator: "/").map(String.init).filter { $0 != "." }
  }

  /// The path with every symlink, `.` and `..` resolved, or nil when it does not exist.
  private static func physicalPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
  }
}
