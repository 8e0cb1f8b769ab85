import ArgumentParser
import Foundation
import PinEventLoop
import PinHTTP
import PinProxy

/// `pinproxy status --admin HOST:PORT`: the operator's page for a terminal.
/// It reads `/status` (JSON) from the admin listener and prints one screen:
/// listeners, pin health warnings, rules, the last refusals, the upstream
/// pool, latency and reloads. Every value a client or origin chose is
/// escaped by `PrintableText`, so a hostile Host cannot move the cursor.
struct StatusCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "status",
    abstract: "Show what a running pinproxy is doing: refusals and why, pin health, latency.",
    discussion: """
      Reads GET /status from the admin listener (admin.address). With admin.tokenFile set, \
      pass the same file with --token-file. Exits 1 when the admin listener cannot be reached \
      or refuses the request.
      """)

  @Option(name: .long, help: "The admin listener, HOST:PORT (an IP address or localhost).")
  var admin: String

  @Option(name: .long, help: "A file holding the admin bearer token (admin.tokenFile).")
  var tokenFile: String?

  @Option(name: .long, help: "How many recent refusals to show.")
  var refusals = 5

  @Flag(name: .long, help: "Print the JSON as the admin listener sent it.")
  var json = false

  func validate() throws {
    guard refusals >= 0 else { throw ValidationError("--refusals takes a count of zero or more") }
  }

  func run() throws {
    let token = try AdminFetch.token(from: tokenFile)
    let body: [UInt8]
    do {
      body = try AdminFetch.get("/status", from: admin, token: token)
    } catch {
      printError("pinproxy: status: \(PrintableText.escaped(error.description))")
      throw ExitCode(1)
    }
    if json {
      return print(StatusText.terminalSafeJSON(String(decoding: body, as: UTF8.self)), terminator: "")
    }
    let status: OperatorStatus
    do {
      status = try OperatorStatus.decoder.decode(OperatorStatus.self, from: Data(body))
    } catch {
      printError("pinproxy: status: \(admin) did not answer with pinproxy's status JSON")
      throw ExitCode(1)
    }
    print(StatusText(status: status, refusals: refusals).render(), terminator: "")
  }
}

/// One screen of text from an `OperatorStatus`.
struct StatusText {
  let status: OperatorStatus
  let refusals: Int

  private func t(_ text: String) -> String { PrintableText.escaped(text) }

  private func ago(_ date: Date) -> String { status.relative(date) }

  /// JSON as received, with every character a terminal could act on
  /// (C1 controls, DEL, line and paragraph separators, bidi controls, BOM)
  /// written as a `\uXXXX` escape: still the same JSON, never a terminal
  /// command. JSONEncoder escapes only C0 controls.
  static func terminalSafeJSON(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
      // C0 controls are JSON's own whitespace here (strings escape them) and
      // the backslash is JSON's escape: both stay.
      if scalar.value >= 0x7f && PrintableText.needsEscape(scalar) {
        let hex = String(scalar.value, radix: 16)
        out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      } else {
        out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  func render() -> String {
    var out =
      "pinproxy \(t(status.version)) · generation \(status.generation) · up \(OperatorStatus.duration(status.time.timeIntervalSince(status.startedAt)))"
      + (status.draining ? " · DRAINING" : "") + "\n"
    out += "\nLISTENERS\n"
    for listener in status.listeners {
      let rates =
        listener.requestsPerSecond.map {
          String(format: "%.1f req/s, %.1f refused/s", $0, listener.refusalsPerSecond ?? 0)
        }
        ?? "rates after 5 s"
      out +=
        "  \(t(listener.name)) \(t(listener.address)) \(t(listener.mode)): \(listener.connections) open, "
        + "\(listener.requests) requests, \(listener.refusals) refused (\(rates))\n"
    }
    if !status.warnings.isEmpty {
      out += "\nPIN HEALTH WARNINGS\n"
      for warning in status.warnings { out += "  ! \(t(warning))\n" }
    }
    if let programs = status.localPrograms, !programs.isEmpty {
      out += "\nLOCAL PROGRAMS (last hour)\n"
      for row in programs {
        out += "  \(t(row.program)) user \(t(row.user)): \(row.requests) requests, \(row.refusals) refused\n"
      }
    }
    out += "\nRULES\n"
    for rule in status.rules {
      var line = "  \(t(rule.name)): \(t(rule.pinningMode))"
      if let health = rule.health {
        if let days = health.daysToExpiry { line += ", matched pin expires in \(days) d" }
        line += health.hasBackup ? ", backup pin" : ", NO backup pin"
      }
      if let list = rule.dynamicList { line += ", list v\(list.version) (\(list.entries) entries)" }
      if let verdict = rule.lastVerdict, let time = rule.lastVerdictTime {
        line += ", last \(t(verdict)) \(ago(time))"
      }
      if rule.refusalsLastHour > 0 { line += ", \(rule.refusalsLastHour) refused in the last hour" }
      out += line + "\n"
    }
    out += "\nLAST REFUSALS\n"
    if status.refusals.isEmpty { out += "  none since start\n" }
    for refusal in status.refusals.prefix(refusals) {
      out +=
        "  \(ago(refusal.time)) \(t(refusal.code)) \(t(refusal.host)) rule \(t(refusal.rule)) "
        + "client \(t(refusal.client))"
        + (refusal.clientUser.map { " user \(t($0)) program \(t(refusal.clientProgram ?? "unknown"))" } ?? "")
        + " incident \(t(refusal.incident))\n    \(t(refusal.reason))\n"
      for (depth, certificate) in refusal.chain.enumerated() {
        out +=
          "    [\(depth)] \(t(certificate.subject)) \(t(certificate.pin))"
          + (certificate.meetsPin ? " (pinned)" : "") + "\n"
      }
      if !refusal.expectedPins.isEmpty {
        out += "    expected: \(refusal.expectedPins.map(t).joined(separator: " "))\n"
      }
    }
    out += "\nUPSTREAM\n  sockets \(status.upstream.socketsOpen)/\(status.upstream.socketLimit), "
    out += "h2 streams in flight \(status.upstream.http2StreamsInFlight)\n"
    for pool in status.upstream.pools {
      out +=
        "  \(t(pool.key)) \(t(pool.protocol)): \(pool.connections) connections, \(pool.streamsInFlight) streams\n"
    }
    out += "\nLATENCY (p50 / p90 / p99)\n"
    func ms(_ value: Double?) -> String { value.map { String(format: "%.1fms", $0 * 1000) } ?? "-" }
    for row in status.latency {
      let name = row.name.replacingOccurrences(of: "pinproxy_", with: "")
      out += "  \(name) \(t(row.labels)): \(row.count) · \(ms(row.p50)) / \(ms(row.p90)) / \(ms(row.p99))\n"
    }
    if let reload = status.reloads.first {
      out += "\nLAST RELOAD \(ago(reload.time)): \(t(reload.result)), generation \(reload.generation)\n"
      for line in (reload.error ?? "").split(separator: "\n") { out += "  \(t(String(line)))\n" }
      for warning in reload.warnings ?? [] { out += "  warning: \(t(warning))\n" }
    }
    return out
  }
}

/// A single GET to the admin listener over a plain TCP socket: it answers
/// one request per connection and closes, so the response is everything
/// read until end of file (at most 16 MiB, 10 s).
enum AdminFetch {
  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  static let maximumBytes = 16 << 20

  /// The bearer token in `file` (`admin.tokenFile`), if one is given.
  static func token(from file: String?) throws -> String? {
    guard let file else { return nil }
    let bytes = try InputFile.bytes(file, flag: "--token-file", expected: "one bearer token", limit: 4096)
    return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// GET `path`; its body when the answer is 200, else a failure naming the status.
  static func get(_ path: String, from address: String, token: String?) throws(Failure) -> [UInt8] {
    let (status, body) = try exchange("GET", path, with: address, token: token)
    guard status == 200 else {
      let text = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(
        in: .whitespacesAndNewlines)
      throw Failure(description: "\(address) answered \(status): \(text)")
    }
    return body
  }

  /// One request (no body) and the answer's status and body.
  static func exchange(_ method: String, _ path: String, with address: String, token: String?)
    throws(Failure) -> (status: Int, body: [UInt8])
  {
    guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...])
    else {
      throw Failure(description: "--admin \(address): expected HOST:PORT")
    }
    let host = String(address[..<colon])
    guard let socketAddress = SocketAddress(ip: host == "localhost" ? "127.0.0.1" : host, port: Int(port))
    else {
      throw Failure(description: "--admin \(address): \(host) is not an IP address")
    }
    let fd = socket(socketAddress.family, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    guard socketAddress.withSockaddr({ connect(fd, $0, $1) }) == 0 else {
      throw Failure(description: "cannot connect to \(address): \(String(cString: strerror(errno)))")
    }
    var request = "\(method) \(path) HTTP/1.1\r\nHost: \(address)\r\nConnection: close\r\n"
    // A state-changing request says it is meant (the admin endpoint
    // refuses one without the field, as a web page could have sent it).
    if method == "POST" { request += "Content-Length: 0\r\nPinproxy-Admin: 1\r\n" }
    if let token { request += "Authorization: Bearer \(token)\r\n" }
    request += "\r\n"
    let bytes = Array(request.utf8)
    guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count
    else {
      throw Failure(description: "cannot send the request to \(address)")
    }
    var response: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
      if count == 0 { break }
      guard count > 0 else {
        throw Failure(description: "reading from \(address): \(String(cString: strerror(errno)))")
      }
      response += buffer[..<count]
      guard response.count <= maximumBytes else {
        throw Failure(description: "\(address) sent more than \(maximumBytes >> 20) MiB")
      }
    }
    var parser = HTTP1Parser(role: .response)
    var status = 0
    var body: [UInt8] = []
    do {
      for event in try parser.feed(response) + (try parser.finish()) {
        switch event {
        case .response(let head): status = head.status
        case .body(let piece): body += piece
        default: break
        }
      }
    } catch {
      throw Failure(description: "\(address) sent a malformed HTTP response")
    }
    return (status, body)
  }
}
