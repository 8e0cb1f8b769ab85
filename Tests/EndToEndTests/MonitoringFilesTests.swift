import Foundation
import PinTestSupport
import XCTest

/// config/monitoring, checked by the tools that read it: promtool accepts the
/// alerting rules and passes their unit tests, Grafana's import finds what it
/// needs in the dashboard, and every metric either file names is one pinproxy
/// exports. A metric renamed in the proxy but not here leaves a panel empty
/// and an alert that can never fire, and nothing else would notice.
///
/// promtool is required, not optional: skipping without it would hide that
/// drift on exactly the machines that lack it.
final class MonitoringFilesTests: XCTestCase {
  static let alerts = "config/monitoring/pinproxy-alerts.yml"
  static let alertTests = "config/monitoring/pinproxy-alerts.test.yml"
  static let dashboard = "config/monitoring/pinproxy-dashboard.json"
  static let alertCount = 11

  /// The series the monitoring files may name. Histograms appear as their
  /// `_bucket` series, the only one `histogram_quantile` reads.
  static let exportedMetrics: Set<String> = [
    "pinproxy_requests_total",
    "pinproxy_refusals_total",
    "pinproxy_request_duration_seconds_bucket",
    "pinproxy_upstream_connect_duration_seconds_bucket",
    "pinproxy_trust_evaluation_duration_seconds_bucket",
    "pinproxy_dynamic_pins_fetch_duration_seconds_bucket",
    "pinproxy_pins_expire_seconds",
    "pinproxy_pinned_certificate_expiry_seconds",
    "pinproxy_dynamic_pins_expire_seconds",
    "pinproxy_dynamic_pins_last_update_timestamp_seconds",
    "pinproxy_dynamic_pins_update_interval_seconds",
    "pinproxy_last_reload_successful",
    "pinproxy_rule_last_verdict_timestamp_seconds",
    "pinproxy_access_log_dropped_total",
    "pinproxy_pin_single",
    "pinproxy_pin_backup_available",
    "pinproxy_pin_unpinned_issuances",
    "pinproxy_fingerprint_cache_hits_total",
    "pinproxy_fingerprint_cache_misses_total",
    "pinproxy_client_connections_open",
  ]

  func testAlertRulesPassPromtoolCheck() throws {
    let result = try promtool(["check", "rules", Self.alerts])
    let output = result.stdout + result.stderr
    XCTAssertEqual(result.status, 0, output)
    XCTAssertTrue(output.contains("SUCCESS: \(Self.alertCount) rules found"), output)
  }

  /// Each alert fires on its failing series with the labels and annotations
  /// written out in the test file, and stays silent on a healthy one.
  func testAlertUnitTestsPass() throws {
    let result = try promtool(["test", "rules", Self.alertTests])
    let output = result.stdout + result.stderr
    XCTAssertEqual(result.status, 0, output)
    XCTAssertTrue(output.contains("SUCCESS"), output)
  }

  /// What Grafana's import relies on: a fixed uid (links to the dashboard
  /// survive a re-import), the data source as an input rather than one
  /// Grafana's uid (which no other Grafana has), and unique panel ids.
  func testDashboardIsImportable() throws {
    let root = try dashboardObject()
    XCTAssertEqual(root["uid"] as? String, "pinproxy")
    XCTAssertEqual(root["title"] as? String, "pinproxy")
    XCTAssertEqual(root["schemaVersion"] as? Int, 39)
    let inputs = root["__inputs"] as? [[String: Any]] ?? []
    XCTAssertTrue(
      inputs.contains {
        $0["name"] as? String == "DS_PROMETHEUS" && $0["type"] as? String == "datasource"
          && $0["pluginId"] as? String == "prometheus"
      }, "no DS_PROMETHEUS data source input")
    let panels = allPanels(root)
    let ids = panels.compactMap { $0["id"] as? Int }
    XCTAssertEqual(ids.count, panels.count, "a panel without an id")
    XCTAssertEqual(Set(ids).count, ids.count, "panel ids repeat: \(ids.sorted())")
    for panel in panels where panel["targets"] != nil {
      let title = panel["title"] as? String ?? "?"
      let targets = panel["targets"] as? [[String: Any]] ?? []
      let sources = [panel["datasource"]] + targets.map { $0["datasource"] }
      for source in sources {
        XCTAssertEqual(
          (source as? [String: Any])?["uid"] as? String, "${DS_PROMETHEUS}", "panel \(title): data source")
      }
    }
  }

  func testDashboardQueriesNameOnlyExportedMetrics() throws {
    let expressions = dashboardExpressions(try dashboardObject())
    XCTAssertFalse(expressions.isEmpty, "the dashboard has no queries")
    for expression in expressions {
      let names = try PromQLNames.metrics(in: expression)
      XCTAssertFalse(names.isEmpty, "no metric found in \(expression)")
      let unknown = names.subtracting(Self.exportedMetrics)
      XCTAssertTrue(unknown.isEmpty, "\(expression) names \(unknown.sorted()), not exported by pinproxy")
    }
  }

  /// Grafana shows a query's syntax error only on the panel; promtool finds
  /// it here. The queries go through `check rules` as recording rules, with
  /// Grafana's interval variables as a duration and the others as a regex.
  func testDashboardQueriesParseAsPromQL() throws {
    let expressions = dashboardExpressions(try dashboardObject())
    var rules = "groups:\n  - name: dashboard\n    rules:\n"
    for (index, expression) in expressions.enumerated() {
      let intervals = try PromQLNames.replacing(#"\$__\w+"#, in: expression, with: "5m")
      let concrete = try PromQLNames.replacing(#"\$\w+"#, in: intervals, with: ".*")
      rules += "      - record: pinproxy_dashboard_query_\(index)\n"
      rules += "        expr: '\(concrete.replacingOccurrences(of: "'", with: "''"))'\n"
    }
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("pinproxy-monitoring-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let file = directory + "/dashboard-queries.yml"
    try Data(rules.utf8).write(to: URL(fileURLWithPath: file))
    let result = try promtool(["check", "rules", file])
    let output = result.stdout + result.stderr
    XCTAssertEqual(result.status, 0, output + "\n" + rules)
    XCTAssertTrue(output.contains("SUCCESS: \(expressions.count) rules found"), output)
  }

  func testAlertExpressionsNameMetricsTheDashboardOrTheListKnows() throws {
    let expressions = try alertExpressions()
    XCTAssertEqual(expressions.count, Self.alertCount, "expressions read from \(Self.alerts)")
    let charted = try dashboardExpressions(try dashboardObject()).reduce(into: Set<String>()) {
      $0.formUnion(try PromQLNames.metrics(in: $1))
    }
    for expression in expressions {
      let names = try PromQLNames.metrics(in: expression)
      XCTAssertFalse(names.isEmpty, "no metric found in \(expression)")
      let unknown = names.subtracting(charted).subtracting(Self.exportedMetrics)
      XCTAssertTrue(unknown.isEmpty, "alert \(expression) names \(unknown.sorted())")
    }
  }

  /// Whoever an alert pages opens the dashboard next: each series an alert
  /// watches has a panel.
  func testEveryAlertedMetricIsCharted() throws {
    let charted = try dashboardExpressions(try dashboardObject()).reduce(into: Set<String>()) {
      $0.formUnion(try PromQLNames.metrics(in: $1))
    }
    for expression in try alertExpressions() {
      let missing = try PromQLNames.metrics(in: expression).subtracting(charted)
      XCTAssertTrue(missing.isEmpty, "alert \(expression): no panel shows \(missing.sorted())")
    }
  }

  /// The scan the checks above rely on: a scan that found nothing would let
  /// every unknown name through.
  func testMetricNameScanSkipsFunctionsLabelsAndDurations() throws {
    let cases: [(String, Set<String>)] = [
      (
        #"histogram_quantile(0.9, sum by (le, h) (rate(a_bucket{le="+Inf",j=~"$j"}[$__rate_interval])))"#,
        ["a_bucket"]
      ),
      ("time() - b_timestamp_seconds > 2 * c_seconds offset 5m", ["b_timestamp_seconds", "c_seconds"]),
      ("x / on (rule) group_left y > bool 0 and z unless w or v", ["x", "y", "z", "w", "v"]),
      ("sum without (code) (rate(u_total[1h:5m])) * 1e3 + Inf - NaN", ["u_total"]),
      ("max by (instance) (t) == 0", ["t"]),
    ]
    for (expression, expected) in cases {
      XCTAssertEqual(try PromQLNames.metrics(in: expression), expected, expression)
    }
  }

  /// promtool from the repository root, so paths read as in
  /// config/monitoring/README.md.
  func promtool(_ arguments: [String]) throws -> ProcessResult {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    let candidates = path.split(separator: ":").map { String($0) + "/promtool" } + ["/usr/bin/promtool"]
    guard let promtool = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
      throw HarnessError(
        "promtool is not installed (scripts/install-deps.sh installs it: apt package prometheus)")
    }
    return try Subprocess.run(promtool, arguments, in: Fixtures.repositoryRoot)
  }

  func dashboardObject() throws -> [String: Any] {
    let data = try Data(contentsOf: URL(fileURLWithPath: Fixtures.repositoryRoot + "/" + Self.dashboard))
    guard let root = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
      throw HarnessError("\(Self.dashboard) is not a JSON object")
    }
    return root
  }

  /// Every panel, with those a collapsed row holds.
  func allPanels(_ root: [String: Any]) -> [[String: Any]] {
    var found: [[String: Any]] = []
    func collect(_ panels: [[String: Any]]) {
      for panel in panels {
        found.append(panel)
        collect(panel["panels"] as? [[String: Any]] ?? [])
      }
    }
    collect(root["panels"] as? [[String: Any]] ?? [])
    return found
  }

  func dashboardExpressions(_ root: [String: Any]) -> [String] {
    allPanels(root).flatMap { panel in
      (panel["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String }
    }
  }

  /// Each alert's `expr`, read line by line: no YAML parser is linked into
  /// the tests, so the rules file keeps every expression on one line.
  func alertExpressions() throws -> [String] {
    let text = try String(contentsOfFile: Fixtures.repositoryRoot + "/" + Self.alerts, encoding: .utf8)
    var expressions: [String] = []
    var alerts = 0
    for line in text.split(separator: "\n") {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if trimmed.hasPrefix("- alert:") { alerts += 1 }
      guard trimmed.hasPrefix("expr:") else { continue }
      var value = trimmed.dropFirst("expr:".count).trimmingCharacters(in: .whitespaces)
      if value.hasPrefix("|") || value.hasPrefix(">") || value.isEmpty {
        throw HarnessError("\(Self.alerts): keep each expr on one line (found \"\(line)\")")
      }
      if value.count >= 2, let quote = value.first, quote == "\"" || quote == "'", value.last == quote {
        value = String(value.dropFirst().dropLast())
      }
      expressions.append(value)
    }
    XCTAssertEqual(alerts, expressions.count, "alerts and expressions in \(Self.alerts)")
    return expressions
  }
}

/// The metric names a PromQL expression selects, found without a PromQL
/// parser: what is not a metric name is cut out (strings, label matchers,
/// ranges, grouping label lists), and of the identifiers left, those called
/// (functions, aggregations) and the keywords are dropped.
enum PromQLNames {
  static let keywords: Set<String> = [
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "atan2", "inf", "nan",
  ]

  static func metrics(in expression: String) throws -> Set<String> {
    var text = expression
    // Strings first: a label value may hold a brace or a bracket.
    for pattern in [
      #""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`"#, #"\{[^}]*\}"#, #"\[[^\]]*\]"#,
      #"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"#,
    ] {
      text = try replacing(pattern, in: text, with: " ")
    }
    // Not after a digit or a dot: the `e` of 1e3 and the `m` of 5m are no names.
    let identifier = try NSRegularExpression(pattern: #"(?<![\w:.$])[A-Za-z_:][\w:]*"#)
    let whole = NSRange(text.startIndex..., in: text)
    var names: Set<String> = []
    for match in identifier.matches(in: text, range: whole) {
      guard let range = Range(match.range, in: text) else { continue }
      let name = String(text[range])
      let next = text[range.upperBound...].first { !$0.isWhitespace }
      if next == "(" || keywords.contains(name.lowercased()) { continue }
      names.insert(name)
    }
    return names
  }

  static func replacing(_ pattern: String, in text: String, with replacement: String) throws -> String {
    let expression = try NSRegularExpression(pattern: pattern)
    return expression.stringByReplacingMatches(
      in: text, range: NSRange(text.startIndex..., in: text),
      withTemplate: NSRegularExpression.escapedTemplate(for: replacement))
  }
}
