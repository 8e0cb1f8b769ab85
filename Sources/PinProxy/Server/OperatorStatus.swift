import Foundation
import PinConfig
import PinTrust

/// Everything the operator's page (`GET /`), `GET /status` (JSON) and
/// `pinproxy status` show: listeners, rules with their pins and pin health,
/// the last refusals with their chains, the upstream pool, reloads and
/// latency. One value, gathered once per request from the same counters
/// `/metrics` renders, so the page and the metrics never disagree.
///
/// Strings here are as they came (a client's Host, an origin's subject):
/// each renderer escapes them for its medium.
public struct OperatorStatus: Codable, Sendable {
  public var version: String
  public var time: Date
  public var startedAt: Date
  public var generation: UInt64
  public var draining: Bool
  public var listeners: [ListenerRow]
  public var rules: [RuleRow]
  public var refusals: [RefusalRow]
  public var upstream: UpstreamRow
  public var reloads: [ReloadRow]
  public var latency: [LatencyRow]
  /// Pin health warnings of every rule, prefixed with the rule's name.
  public var warnings: [String]
  /// The programs on this host with the most requests and refusals in the
  /// last hour (clients of loopback listeners, by their socket's owner).
  public var localPrograms: [LocalProgramRow]?
  public static let localProgramsShown = 10

  public struct LocalProgramRow: Codable, Sendable {
    public var user: String
    public var program: String
    public var requests: Int
    public var refusals: Int
  }

  public struct ListenerRow: Codable, Sendable {
    public var name: String
    public var address: String
    public var mode: String
    public var refusalDetail: String
    public var connections: Int
    public var requests: UInt64
    public var refusals: Int
    /// Over the last minute (or since start); nil until two samples exist.
    public var requestsPerSecond: Double?
    public var refusalsPerSecond: Double?
  }

  public struct RuleRow: Codable, Sendable {
    public var name: String
    public var pinningMode: String
    public var anchors: [String]
    public var pins: [PinRow]
    public var pinsExpire: Date?
    public var dynamicList: DynamicListRow?
    public var transparency: String
    public var revocation: String
    public var lastVerdict: String?
    public var lastVerdictTime: Date?
    public var refusalsLastHour: Int
    public var health: HealthRow?
    /// `NAME (URL)` of the parent proxy the rule's connections go through; nil: direct.
    public var parentProxy: String?
  }

  /// A configured pin and what it matched in the last accepted chain.
  public struct PinRow: Codable, Sendable {
    public var pin: String
    public var matchedSubject: String?
    public var matchedNotAfter: Date?
    /// A pin no certificate of the last accepted chain uses.
    public var backup: Bool
  }

  public struct DynamicListRow: Codable, Sendable {
    public var version: UInt64
    public var source: String
    public var entries: Int
    public var lastUpdate: Date?
    public var nextUpdate: Date
    public var lastFailure: String?
  }

  public struct HealthRow: Codable, Sendable {
    public var chainSeen: Bool
    public var matchedPin: String?
    public var matchedSubject: String?
    public var daysToExpiry: Int?
    public var hasBackup: Bool
    public var singlePin: Bool
    public var warnings: [String]
  }

  public struct RefusalRow: Codable, Sendable {
    public var incident: String
    public var time: Date
    public var client: String
    /// For a client on this host: the user owning its socket, its program.
    public var clientUser: String?
    public var clientProgram: String?
    public var listener: String?
    public var method: String
    public var host: String
    public var path: String?
    public var userAgent: String?
    public var rule: String
    public var code: String
    public var status: Int
    public var reason: String
    public var chain: [CertificateRow]
    public var expectedPins: [String]
    public var anchors: [String]
    public var pinningMode: String?
    /// For a pin failure on an otherwise valid chain: what to do, and the
    /// YAML line (with the new pin) to paste.
    public var advice: String?
    public var adviceYAML: String?
  }

  public struct CertificateRow: Codable, Sendable {
    public var subject: String
    public var issuer: String
    public var notBefore: Date
    public var notAfter: Date
    public var pin: String
    public var certificateSHA256: String
    public var meetsPin: Bool
    /// The anchor the reason names, which the server did not send.
    public var unsent: Bool?
  }

  public struct UpstreamRow: Codable, Sendable {
    public var socketsOpen: Int
    public var socketLimit: Int
    public var http2StreamsInFlight: Int
    public var pools: [PoolRow]
  }

  public struct PoolRow: Codable, Sendable {
    public var key: String
    public var `protocol`: String
    /// Idle pooled HTTP/1.1 connections, or open h2 connections.
    public var connections: Int
    public var streamsInFlight: Int
  }

  public struct ReloadRow: Codable, Sendable {
    public var time: Date
    public var result: String
    public var generation: UInt64
    public var error: String?
    public var warnings: [String]?
  }

  /// A histogram series as quantile estimates (linear within a bucket, as
  /// Prometheus' `histogram_quantile`).
  public struct LatencyRow: Codable, Sendable {
    public var name: String
    public var labels: String
    public var count: UInt64
    public var p50: Double?
    public var p90: Double?
    public var p99: Double?
  }

  /// `3 d 4 h`, `2 h 5 min`, `7 min`, `12 s`: how the page and `pinproxy
  /// status` show a span.
  public static func duration(_ seconds: Double) -> String {
    let whole = Int(seconds)
    if whole >= 86_400 { return "\(whole / 86_400) d \(whole % 86_400 / 3600) h" }
    if whole >= 3600 { return "\(whole / 3600) h \(whole % 3600 / 60) min" }
    if whole >= 60 { return "\(whole / 60) min" }
    return "\(whole) s"
  }

  /// `date` from the status's own time: `in 3 d 4 h`, `5 min ago`.
  public func relative(_ date: Date) -> String { OperatorStatus.relative(date, from: time) }

  /// `date` as seen from `now`.
  static func relative(_ date: Date, from now: Date) -> String {
    let seconds = date.timeIntervalSince(now)
    // Within a second either way, a countdown or an age says nothing.
    if abs(seconds) < 1 { return "just now" }
    let text = OperatorStatus.duration(abs(seconds))
    return seconds >= 0 ? "in \(text)" : "\(text) ago"
  }

  public static let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .iso8601
    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
    return encoder
  }()

  public static let decoder: JSONDecoder = {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    return decoder
  }()
}

extension OperatorStatus.RefusalRow {
  init(_ refusal: RecordedRefusal) {
    self.init(
      incident: refusal.incident, time: refusal.time, client: refusal.client, clientUser: refusal.clientUser,
      clientProgram: refusal.clientProgram, listener: refusal.listener,
      method: refusal.method, host: refusal.host, path: refusal.path, userAgent: refusal.userAgent,
      rule: refusal.rule, code: refusal.code,
      status: refusal.status, reason: refusal.reason,
      chain: refusal.chain.map {
        OperatorStatus.CertificateRow(
          subject: $0.subject, issuer: $0.issuer, notBefore: $0.notBefore, notAfter: $0.notAfter, pin: $0.pin,
          certificateSHA256: $0.certificateSHA256, meetsPin: $0.meetsPin, unsent: $0.unsent ? true : nil)
      }, expectedPins: refusal.expected?.pins ?? [], anchors: refusal.expected?.anchors ?? [],
      pinningMode: refusal.expected?.pinningMode, advice: refusal.advice, adviceYAML: refusal.adviceYAML)
  }
}

extension OperatorStatus.HealthRow {
  init(_ health: PinHealth) {
    self.init(
      chainSeen: health.chainSeen, matchedPin: health.matched?.pin, matchedSubject: health.matched?.subject,
      daysToExpiry: health.daysToExpiry, hasBackup: health.hasBackup, singlePin: health.isSinglePin,
      warnings: health.warnings)
  }
}

extension LatencyHistogram {
  /// Each series with observations, as quantiles.
  func latencyRows() -> [OperatorStatus.LatencyRow] {
    series.indices.compactMap { index in
      let totals = totals(index)
      guard totals.count > 0 else { return nil }
      let labels = zip(labelNames, series[index]).map { "\($0)=\($1)" }.joined(separator: " ")
      return OperatorStatus.LatencyRow(
        name: name, labels: labels, count: totals.count, p50: quantile(0.5, totals),
        p90: quantile(0.9, totals), p99: quantile(0.99, totals))
    }
  }

  /// The `q` quantile in seconds, interpolated within its bucket; the top
  /// bound when it falls in `+Inf`.
  func quantile(_ q: Double, _ totals: Totals) -> Double? {
    let count = totals.count
    guard count > 0 else { return nil }
    let rank = q * Double(count)
    var seen: UInt64 = 0
    for (bucket, inBucket) in totals.buckets.enumerated() {
      let before = Double(seen)
      seen += inBucket
      guard Double(seen) >= rank, inBucket > 0 else { continue }
      guard bucket < bounds.count else { return bounds.last }
      let lower = bucket == 0 ? 0 : bounds[bucket - 1]
      return lower + (bounds[bucket] - lower) * (rank - before) / Double(inBucket)
    }
    return bounds.last
  }
}
