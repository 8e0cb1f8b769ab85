import Foundation
import PinConfig
import PinTrust
import Synchronization

/// The proxy's counters and gauges, rendered in the Prometheus text format
/// (0.0.4). Written directly rather than through swift-metrics and a backend:
/// a dozen series with fixed names and labels are easier to keep exactly
/// right by hand than through a bootstrap and a translation layer.
final class ProxyMetrics: Sendable {
  /// The listeners whose requests are counted per loop, in configuration
  /// order (bound at start; a reload cannot rename them).
  let listenerNames: [String]
  /// Request duration by listener and status class: also the source of
  /// `pinproxy_requests_total` (its counts), so the two always agree.
  let requestDuration: LatencyHistogram
  /// Requests of a listener outside `listenerNames` (none in the daemon).
  let otherRequests = LabeledCounter(
    "pinproxy_requests_total", "Requests answered, by listener and status class.",
    labels: ["listener", "class"])
  /// Dial to a usable upstream: resolution, connect, TLS handshake and the
  /// trust decision, by handshake kind (`full`, `resumed`, `none` for plain).
  let upstreamConnectDuration: LatencyHistogram
  /// Trust decisions, by whether the fingerprint cache served them.
  let trustEvaluationDuration: LatencyHistogram
  /// Dynamic pin list fetches, by result (`ok`, `failed`).
  let pinListFetchDuration: LatencyHistogram
  /// False after a reload failed, until one succeeds.
  let lastReloadSucceeded = Atomic<Bool>(true)
  /// The last refusals, for the operator's page.
  let refusalLog = RefusalLog()
  /// Requests and refusals of programs on this host over the last hour.
  let localActivity: LocalProgramActivity
  /// Each rule's last verdict, pin health and recent refusals.
  let rules = RuleActivity()
  /// Per listener of `listenerNames`: connections open, and refusals answered.
  let listenerConnections: [SharedCount]
  let listenerRefusals: [SharedCount]
  /// Refused requests and tunnels, by failure code and matched domain rule.
  let refusals = LabeledCounter(
    "pinproxy_refusals_total", "Refused requests and tunnels, by failure code and matched domain rule.",
    labels: ["code", "rule"])
  let upstreamHandshakes = LabeledCounter(
    "pinproxy_upstream_handshakes_total", "Upstream TLS handshakes, full or resumed.", labels: ["kind"])
  let reloads = LabeledCounter(
    "pinproxy_reloads_total", "Configuration reloads, by result.", labels: ["result"])
  /// Pin failures that report-only let through ("would have refused").
  let pinFailuresWaived = LabeledCounter(
    "pinproxy_pin_failures_waived_total",
    "Pin failures let through by report-only (report.enforce: false): refusals that would have happened.",
    labels: ["code", "rule"])
  /// Pin-failure reports, by what became of them.
  let pinReports = LabeledCounter(
    "pinproxy_pin_reports_total",
    "Pin-failure reports: sent, failed, deduplicated (24 h) or dropped (queue full).",
    labels: ["result"])
  /// Dynamic pin list updates that were refused or could not be fetched.
  let pinListFailures = LabeledCounter(
    "pinproxy_dynamic_pins_update_failures_total",
    "Dynamic pin list updates that failed, by rule and reason.",
    labels: ["rule", "reason"])
  /// Upstream connections opened, by the protocol ALPN settled on.
  let upstreamConnections = LabeledCounter(
    "pinproxy_upstream_connections_total", "Upstream connections opened, by protocol (http/1.1, h2).",
    labels: ["protocol"])
  /// HTTP/2 control events, by side (upstream, downstream) and kind
  /// (goaway, reset received, malformed refused, flood).
  let http2Events = LabeledCounter(
    "pinproxy_http2_events_total",
    "HTTP/2 GOAWAYs and stream resets received, malformed messages refused and floods stopped, by side.",
    labels: ["side", "event"])
  /// CONNECT tunnels spliced raw, by listener and the rule governing the
  /// host (`none` for a host no rule governs): the pins a tunnel of a
  /// pinned rule's host bypassed were waived by a passthrough entry.
  let passthroughTunnels = LabeledCounter(
    "pinproxy_passthrough_tunnels_total",
    "CONNECT tunnels spliced raw (not intercepted, no pins checked), by listener and governing rule.",
    labels: ["listener", "rule"])
  /// Connections refused because of who the client is: its address
  /// outside `allowedClients` (at accept), or its certificate.
  let clientsRefused = LabeledCounter(
    "pinproxy_clients_refused_total",
    "Client connections refused for their address (allowedClients) or their certificate, by listener.",
    labels: ["listener", "reason"])
  /// Tunnels asked of parent proxies, by parent and result (`open`,
  /// `refused`, `unreachable`): bounded by the configured parents.
  let parentProxyConnects = LabeledCounter(
    "pinproxy_parent_proxy_connects_total",
    "Tunnels asked of parent proxies (parentProxies), by parent and result: open, refused, unreachable.",
    labels: ["parent", "result"])
  /// Requests per authenticated user. Only verified user names become
  /// labels, so the series are bounded by the htpasswd file.
  let userRequests = LabeledCounter(
    "pinproxy_user_requests_total",
    "Requests answered per authenticated user (listeners with proxyAuth.logUser only).",
    labels: ["listener", "user"])
  /// Streams open on HTTP/2 connections, both sides.
  let http2StreamsInFlight = SharedCount()
  let idlePooledConnections = SharedCount()
  let mintedCertificates = SharedCount()
  let startTime = Date()

  /// - Parameters:
  ///   - listeners: the names of the listeners bound at start.
  ///   - loops: the number of event loops (one set of histogram cells each).
  ///   - localProgramsShown: whether an admin endpoint shows the local
  ///     programs' activity (`LocalProgramActivity.isShown`).
  init(listeners: [String] = [], loops: Int = 1, localProgramsShown: Bool = true) {
    listenerNames = listeners
    localActivity = LocalProgramActivity(shown: localProgramsShown)
    listenerConnections = listeners.map { _ in SharedCount() }
    listenerRefusals = listeners.map { _ in SharedCount() }
    requestDuration = LatencyHistogram(
      "pinproxy_request_duration_seconds",
      "Time from a request's head to the end of its answer (or its refusal), by listener and status class.",
      labels: ["listener", "class"],
      series: listeners.flatMap { name in ProxyMetrics.statusClasses.map { [name, $0] } },
      bounds: LatencyHistogram.requestBounds, loops: loops)
    upstreamConnectDuration = LatencyHistogram(
      "pinproxy_upstream_connect_duration_seconds",
      "New upstream connections: name resolution, TCP connect and TLS handshake with the trust decision, by handshake kind.",
      labels: ["handshake"], series: UpstreamTLS.allCases.map { [$0.rawValue] },
      bounds: LatencyHistogram.requestBounds, loops: loops)
    trustEvaluationDuration = LatencyHistogram(
      "pinproxy_trust_evaluation_duration_seconds",
      "Upstream trust decisions, by whether the fingerprint cache served them (hit) or a full evaluation ran (miss).",
      labels: ["cache"], series: [["hit"], ["miss"]], bounds: LatencyHistogram.evaluationBounds, loops: loops)
    pinListFetchDuration = LatencyHistogram(
      "pinproxy_dynamic_pins_fetch_duration_seconds",
      "Dynamic pin list fetches (request, signature check and store), by result.",
      labels: ["result"], series: [["ok"], ["failed"]], bounds: LatencyHistogram.requestBounds, loops: 1)
  }

  /// Every histogram, in the order they are rendered (by name).
  var histograms: [LatencyHistogram] {
    [pinListFetchDuration, requestDuration, trustEvaluationDuration, upstreamConnectDuration]
  }

  /// Every labeled series, in the order they are rendered (by name).
  private var labeled: [LabeledCounter] {
    [
      reloads, refusals, upstreamHandshakes, pinFailuresWaived, pinReports, pinListFailures,
      upstreamConnections, http2Events, clientsRefused, userRequests, passthroughTunnels, parentProxyConnects,
    ].sorted {
      $0.name < $1.name
    }
  }

  /// Counts a request answered on `listener` and records its duration, on
  /// loop `loop`'s cells: no lock, nothing shared with another loop.
  func request(listener: String, status: Int, nanoseconds: UInt64, loop: Int) {
    let classIndex = min(4, max(0, status / 100 - 1))
    guard let slot = listenerNames.firstIndex(of: listener) else {
      return otherRequests.increment(listener, ProxyMetrics.statusClass(status))
    }
    requestDuration.observe(slot * 5 + classIndex, nanoseconds: nanoseconds, loop: loop)
  }

  /// A refusal answered on `listener` (for its refusals per second).
  func listenerRefused(_ listener: String) {
    if let slot = listenerNames.firstIndex(of: listener) { listenerRefusals[slot].add(1) }
  }

  /// The open-connection count of `listener`, if it is one of `listenerNames`.
  func connections(of listener: String) -> SharedCount? {
    listenerNames.firstIndex(of: listener).map { listenerConnections[$0] }
  }

  /// Requests answered, per listener and status class, from the duration
  /// histogram's counts (what `/metrics` and the page show).
  func requestCounts() -> [(listener: String, statusClass: String, count: UInt64)] {
    var rows: [(String, String, UInt64)] = []
    for (index, labels) in requestDuration.series.enumerated() {
      let count = requestDuration.totals(index).count
      if count > 0 { rows.append((labels[0], labels[1], count)) }
    }
    return rows
  }

  /// `pinproxy_requests_total` from the histogram's counts, and any listener
  /// outside it.
  private func renderRequests(into out: inout String) {
    var counted: [(labels: [String], value: Int)] = requestCounts().map {
      ([$0.listener, $0.statusClass], Int($0.count))
    }
    counted += otherRequests.rows()
    out += "# HELP pinproxy_requests_total Requests answered, by listener and status class.\n"
    out += "# TYPE pinproxy_requests_total counter\n"
    for row in counted.sorted(by: { $0.labels.joined() < $1.labels.joined() }) {
      out +=
        "pinproxy_requests_total{listener=\"\(ProxyMetrics.escape(row.labels[0]))\",class=\"\(row.labels[1])\"} \(row.value)\n"
    }
  }

  func refusal(_ failure: ProxyFailure, rule: String) { refusals.increment([failure.code.rawValue, rule]) }

  func upstreamHandshake(_ kind: UpstreamTLS) { upstreamHandshakes.increment([kind.rawValue]) }

  /// Values read from elsewhere at render time.
  struct Gauges {
    var cacheHits: Int
    var cacheMisses: Int
    var cacheEntries: Int
    var openConnections: Int
    /// Upstream sockets counted by the budget, and its total limit.
    var upstreamSockets = 0
    var upstreamSocketLimit = 0
    var generation: UInt64
    var draining: Bool
    var droppedLogLines: Int
    /// The pin list stores of the running configuration.
    var pinStores: [DynamicPinStore] = []
    /// Each rule with `pinsExpire` and static pins: its name and the instant.
    var pinExpiries: [(rule: String, expires: Date)] = []
    /// Revocation evidence examined, by source and result.
    var revocationChecks: [(source: String, result: String, count: Int)] = []
    /// Fetched CRLs and OCSP answers held.
    var revocationHeld: (crls: Int, answers: Int) = (0, 0)
    /// Each pinned rule's pin health (from the last accepted chain, else
    /// from its configuration).
    var pinHealth: [(rule: String, health: PinHealth)] = []
    /// Each pinned rule and the CT sightings of its names that its pins do
    /// not cover.
    var unpinnedIssuances: [(rule: String, count: Int)] = []
    var now = Date()
  }

  func render(_ gauges: Gauges) -> String {
    var out = ""
    for counter in labeled { out += counter.render() }
    renderRequests(into: &out)
    rules.renderVerdictTimes(into: &out)
    // A listener gets a duration series per status class once one happens.
    for histogram in histograms { histogram.render(into: &out, skippingEmpty: histogram === requestDuration) }
    func single(_ name: String, _ type: String, _ help: String, _ value: String) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
    }
    single(
      "pinproxy_last_reload_successful", "gauge",
      "1 unless the last reload failed (the running configuration stays).",
      lastReloadSucceeded.load(ordering: .relaxed) ? "1" : "0")
    single(
      "pinproxy_fingerprint_cache_hits_total", "counter",
      "Trust decisions served from the fingerprint cache.", String(gauges.cacheHits))
    single(
      "pinproxy_fingerprint_cache_misses_total", "counter", "Trust decisions that needed a full evaluation.",
      String(gauges.cacheMisses))
    single(
      "pinproxy_fingerprint_cache_entries", "gauge", "Entries in the fingerprint cache.",
      String(gauges.cacheEntries))
    single(
      "pinproxy_upstream_pool_idle_connections", "gauge", "Idle pooled upstream connections.",
      String(idlePooledConnections.value))
    single(
      "pinproxy_http2_streams_in_flight", "gauge", "HTTP/2 streams open, upstream and downstream.",
      String(http2StreamsInFlight.value))
    single(
      "pinproxy_client_connections_open", "gauge", "Open client connections.", String(gauges.openConnections))
    single(
      "pinproxy_upstream_sockets_open", "gauge", "Upstream sockets counted by the upstream budget.",
      String(gauges.upstreamSockets))
    single(
      "pinproxy_upstream_socket_limit", "gauge",
      "Upstream sockets the budget allows in all (from RLIMIT_NOFILE).",
      String(gauges.upstreamSocketLimit))
    single(
      "pinproxy_minted_certificates_total", "counter", "Leaves minted by the local CA.",
      String(mintedCertificates.value))
    single(
      "pinproxy_config_generation", "gauge", "Generation of the configuration in force.",
      String(gauges.generation))
    single("pinproxy_draining", "gauge", "1 while shutting down.", gauges.draining ? "1" : "0")
    single(
      "pinproxy_access_log_dropped_total", "counter",
      "Access lines dropped because standard error did not keep up.", String(gauges.droppedLogLines))
    renderPinLists(gauges.pinStores, now: gauges.now, into: &out)
    renderPinHealth(gauges.pinHealth, into: &out)
    ProxyMetrics.renderUnpinnedIssuances(gauges.unpinnedIssuances, into: &out)
    let checks = "pinproxy_revocation_checks_total"
    out +=
      "# HELP \(checks) Revocation evidence examined by trust evaluations, by source (crl, staple, ocsp) and result.\n"
      + "# TYPE \(checks) counter\n"
    for (source, result, count) in gauges.revocationChecks {
      out += "\(checks){source=\"\(source)\",result=\"\(result)\"} \(count)\n"
    }
    let held = "pinproxy_revocation_fetched"
    out +=
      "# HELP \(held) Revocation information fetched and held: CRLs from distribution points, OCSP answers.\n"
      + "# TYPE \(held) gauge\n\(held){kind=\"crl\"} \(gauges.revocationHeld.crls)\n"
      + "\(held){kind=\"ocsp\"} \(gauges.revocationHeld.answers)\n"
    if !gauges.pinExpiries.isEmpty {
      let name = "pinproxy_pins_expire_seconds"
      out +=
        "# HELP \(name) Seconds until each rule's static pins expire (pinsExpire); negative: expired, not enforced.\n"
        + "# TYPE \(name) gauge\n"
      for (rule, expires) in gauges.pinExpiries {
        out +=
          "\(name){rule=\"\(ProxyMetrics.escape(rule))\"} \(String(format: "%.0f", expires.timeIntervalSince(gauges.now)))\n"
      }
    }
    single(
      "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch.",
      String(format: "%.3f", startTime.timeIntervalSince1970))
    return out
  }

  static func escape(_ value: String) -> String {
    value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
      .replacingOccurrences(of: "\n", with: "\\n")
  }

  static func statusClass(_ status: Int) -> String {
    (1...5).contains(status / 100) ? statusClasses[status / 100 - 1] : "\(status / 100)xx"
  }
  /// Made once: counted for every request.
  static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]
}

/// A counter shared by reference between components (pools, sessions).
final class SharedCount: Sendable {
  private let count = Atomic<Int>(0)
  func add(_ delta: Int) { count.add(delta, ordering: .relaxed) }
  /// Adds `delta` and returns the new value.
  func adding(_ delta: Int) -> Int { count.add(delta, ordering: .relaxed).newValue }
  var value: Int { count.load(ordering: .relaxed) }
}

/// One counter family with fixed label names, created once (a handle per
/// series family, each with its own lock, rather than one global map).
final class LabeledCounter: Sendable {
  let name: String
  let help: String
  let labelNames: [String]
  private let values = Locked<[Labels: Int]>([:])

  /// Label values: the first two inline, so that counting a request (two
  /// labels) builds no array.
  private struct Labels: Hashable {
    let first: String
    let second: String
    let rest: [String]

    init(_ labels: [String]) {
      first = labels.first ?? ""
      second = labels.count > 1 ? labels[1] : ""
      rest = Array(labels.dropFirst(2))
      count = labels.count
    }

    init(_ first: String, _ second: String) {
      self.first = first
      self.second = second
      rest = []
      count = 2
    }

    let count: Int
    var all: [String] { Array([first, second].prefix(count)) + rest }
  }

  init(_ name: String, _ help: String, labels: [String]) {
    self.name = name
    self.help = help
    labelNames = labels
  }

  /// `labels` in the order of `labelNames`.
  func increment(_ labels: [String]) { values.withLock { $0[Labels(labels), default: 0] += 1 } }

  /// Two label values, without an array.
  func increment(_ first: String, _ second: String) {
    values.withLock { $0[Labels(first, second), default: 0] += 1 }
  }

  func value(_ labels: [String]) -> Int { values.withLock { $0[Labels(labels)] ?? 0 } }

  /// Every series with its label values and count.
  func rows() -> [(labels: [String], value: Int)] {
    values.withLock { $0 }.map { (labels: $0.key.all, value: $0.value) }
  }

  func render() -> String {
    var out = "# HELP \(name) \(help)\n# TYPE \(name) counter\n"
    let rows = rows()
    for (labels, value) in rows.sorted(by: { $0.labels.joined() < $1.labels.joined() }) {
      let rendered = zip(labelNames, labels).map { "\($0)=\"\(ProxyMetrics.escape($1))\"" }.joined(
        separator: ",")
      out += "\(name){\(rendered)} \(value)\n"
    }
    return out
  }
}
