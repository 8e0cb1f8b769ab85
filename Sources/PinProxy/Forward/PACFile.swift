import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust

/// The proxy auto-config file a forward listener serves at `/proxy.pac`
/// and `/wpad.dat`, written from the policy in force: the hosts a domain
/// rule or a passthrough entry names go through this listener, the rest
/// directly when `defaults.action` is `deny` (the proxy would refuse them),
/// else through it too. The smallest blast radius on a fragile client:
/// only what the policy governs changes path.
///
/// Hosts are compared with `dnsDomainIs` and `==` on the lowercased host,
/// every name written as a JavaScript string literal; no pattern or
/// regular expression is built from configuration text, and no helper that
/// blocks on DNS (`dnsResolve`, `isInNet`) is used. Pure.
enum PACFile {
  /// The file's text for `listener` under `snapshot`; `proxy` is the
  /// `host:port` clients reach the listener at.
  static func text(snapshot: RuntimeSnapshot, listener: ListenerConfig, proxy: String) -> String {
    var exact: [String] = []
    var suffixes: [String] = []
    for rule in snapshot.configuration.domains {
      let name = rule.domain.description
      if rule.includesSubdomains { suffixes.append(name) } else { exact.append(name) }
    }
    for entry in listener.passthrough {
      if entry.hasPrefix("*.") {
        suffixes.append(String(entry.dropFirst(2)).lowercased())
      } else {
        exact.append(entry.lowercased())
      }
    }
    return text(
      listener: listener.name, generation: snapshot.generation, exact: exact, suffixes: suffixes,
      denyByDefault: snapshot.configuration.defaults.action == .deny, proxy: proxy)
  }

  /// The file from its parts: every piece of text in it that came from the
  /// configuration (the listener's name, the hosts, the proxy address) is
  /// written as a string literal, whatever it holds.
  static func text(
    listener: String, generation: UInt64, exact: [String], suffixes: [String], denyByDefault: Bool,
    proxy: String
  ) -> String {
    let through = "PROXY " + proxy
    let rest = denyByDefault ? "DIRECT" : through
    // Even in a comment: a name with a line break would end the comment.
    var out = "// pinproxy \(ProxyVersion.current): listener \(literal(listener)), generation \(generation)\n"
    out += "// Hosts the policy governs go through pinproxy; "
    out += denyByDefault ? "the rest directly.\n" : "so does the rest.\n"
    out += "function FindProxyForURL(url, host) {\n"
    out += "  host = host.toLowerCase();\n"
    out += "  if (host.charAt(host.length - 1) == \".\") host = host.substring(0, host.length - 1);\n"
    for name in exact.sorted() where !suffixes.contains(name) {
      out += "  if (host == \(literal(name))) return \(literal(through));\n"
    }
    for name in Set(suffixes).sorted() {
      out +=
        "  if (host == \(literal(name)) || dnsDomainIs(host, \(literal("." + name)))) return \(literal(through));\n"
    }
    out += "  return \(literal(rest));\n}\n"
    return out
  }

  /// A JavaScript string literal: names are validated hosts already, but
  /// nothing of the configuration reaches the file unquoted.
  static func literal(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      default:
        if scalar.isASCII && scalar.value >= 0x20 && scalar.value < 0x7f {
          out.unicodeScalars.append(scalar)
        } else {
          out += String(format: "\\u%04x", scalar.value)
        }
      }
    }
    return out + "\""
  }

  /// The `host:port` a PAC names for `listener`: its address, or, when it
  /// listens on every address, the address the client actually reached it
  /// at (`reached`, the connection's local address bytes). Never the
  /// request's `Host` field: a client names what it likes there, and a
  /// cached PAC file would send its browser wherever that said.
  static func proxyAddress(listener: ListenerConfig, reached: [UInt8]?) -> String {
    let address = listener.address
    let unspecified = address.host == "0.0.0.0" || address.host == "::" || address.host == "[::]"
    var host = address.host
    if unspecified, let reached, let ip = IPAddress(bytes: IPBytes(reached).unmappedIPv4.array) {
      host = ip.description
    }
    if host.contains(":") && !host.hasPrefix("[") { host = "[" + host + "]" }
    return "\(host):\(address.port)"
  }

  /// The whole answer to `GET /proxy.pac`: 200 with the file (no body for
  /// HEAD), or 304 when `If-None-Match` names its ETag; always closing.
  static func answer(_ text: String, head: HTTPRequestHead) -> [UInt8] {
    let body = Array(text.utf8)
    let etag = "\"" + String(SHA256.digest(body).lowercaseHex.prefix(32)) + "\""
    let notModified =
      head.headers.first("If-None-Match").map { field in
        field.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == etag }
      } ?? false
    var out = notModified ? "HTTP/1.1 304 Not Modified\r\n" : "HTTP/1.1 200 OK\r\n"
    out += "Content-Type: application/x-ns-proxy-autoconfig\r\n"
    out += "ETag: \(etag)\r\nCache-Control: max-age=300\r\nConnection: close\r\n"
    out += notModified ? "\r\n" : "Content-Length: \(body.count)\r\n\r\n"
    let sendsBody = !notModified && head.method != "HEAD"
    return Array(out.utf8) + (sendsBody ? body : [])
  }

  /// Whether `head` asks a forward listener for its PAC file.
  static func isRequest(_ head: HTTPRequestHead) -> Bool {
    guard head.method == "GET" || head.method == "HEAD", case .origin(let target) = head.target else {
      return false
    }
    let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    return path == "/proxy.pac" || path == "/wpad.dat"
  }
}
