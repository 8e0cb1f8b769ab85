import ArgumentParser
import Foundation
import Histogram
import PinHTTP

/// Drives HTTP/1.1 load at a server or through a forward proxy, bounded by
/// time or request count, and reports requests/s, MB/s, latency percentiles,
/// errors by kind and (for pinproxy) upstream handshakes.
@main
struct LoadCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pinproxy-load", abstract: "HTTP/1.1 load generator (loopback only).")

  @Argument(help: "http://host[:port]/path to fetch.")
  var url: String

  @Option(name: .shortAndLong, help: "Concurrent connections.")
  var connections = 32

  @Option(name: .shortAndLong, help: "Seconds to run (ignored when --requests is set).")
  var duration = 10.0

  @Option(name: .long, help: "Total requests instead of a duration.")
  var requests: Int?

  @Option(name: .long, help: "Send absolute-form requests through this forward proxy (host:port).")
  var proxy: String?

  @Flag(name: .long, help: "Open a new connection for every request (Connection: close).")
  var newConnectionPerRequest = false

  @Option(name: .long, help: "Read pinproxy_upstream_handshakes_total from this admin address (host:port).")
  var metrics: String?

  @Flag(name: .long, help: "One JSON object instead of the text report.")
  var json = false

  func run() throws {
    guard let target = URLParts(url) else { throw ValidationError("url must be http://host[:port]/path") }
    let connectTo: (String, Int)
    if let proxy {
      guard let parts = URLParts("http://\(proxy)/") else {
        throw ValidationError("--proxy must be host:port")
      }
      connectTo = (parts.host, parts.port)
    } else {
      connectTo = (target.host, target.port)
    }
    guard connectTo.0 == "127.0.0.1" || connectTo.0 == "localhost" || connectTo.0 == "::1" else {
      throw ValidationError("load is only sent to loopback addresses")
    }
    let requestTarget = proxy == nil ? target.path : url
    let request = Array(
      ("GET \(requestTarget) HTTP/1.1\r\nHost: \(target.authority)\r\nUser-Agent: pinproxy-load\r\n"
        + (newConnectionPerRequest ? "Connection: close\r\n" : "") + "\r\n").utf8)
    let handshakesBefore = metrics.flatMap(Self.upstreamHandshakes)
    let plan = LoadPlan(
      host: connectTo.0, port: connectTo.1, request: request, keepAlive: !newConnectionPerRequest,
      deadline: requests == nil ? Date().addingTimeInterval(duration) : .distantFuture, budget: requests)
    let result = plan.run(connections: connections)
    var handshakes: Int?
    if let before = handshakesBefore, let after = metrics.flatMap(Self.upstreamHandshakes) {
      handshakes = after - before
    }
    print(result.report(json: json, upstreamHandshakes: handshakes))
  }

  /// pinproxy_upstream_handshakes_total (full + resumed) from the admin endpoint.
  static func upstreamHandshakes(_ address: String) -> Int? {
    guard let url = URL(string: "http://\(address)/metrics"),
      let text = try? String(contentsOf: url, encoding: .utf8)
    else {
      return nil
    }
    return text.split(separator: "\n").filter { $0.hasPrefix("pinproxy_upstream_handshakes_total{") }
      .compactMap { Int($0.split(separator: " ").last ?? "") }.reduce(0, +)
  }
}

struct URLParts {
  let host: String
  let port: Int
  let path: String
  var authority: String { port == 80 ? host : "\(host):\(port)" }

  init?(_ text: String) {
    guard text.hasPrefix("http://") else { return nil }
    let rest = text.dropFirst("http://".count)
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let authority = rest[..<slash]
    path = slash == rest.endIndex ? "/" : String(rest[slash...])
    if let colon = authority.lastIndex(of: ":"), let port = Int(authority[authority.index(after: colon)...]) {
      host = String(authority[..<colon])
      self.port = port
    } else {
      host = String(authority)
      port = 80
    }
  }
}
