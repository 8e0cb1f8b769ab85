import Foundation
import PinTLS
import PinTrust

/// The operator's page (`GET /` on the admin listener): one self-contained
/// HTML document rendered on the server from an `OperatorStatus`. No
/// external asset; the only script (copying a pin, refreshing) is inline and
/// allowed by its hash in the Content-Security-Policy, and the page works
/// without it (pins are plain selectable text). Every value goes through
/// `RefusalPage.escape` (`PrintableText`, then HTML), attributes included,
/// so that a hostile Host, path, SNI or certificate subject shows as text.
struct OperatorPage {
  let status: OperatorStatus

  /// Copy buttons and the refresh switch.
  static let script = """
    document.addEventListener("click",function(e){var b=e.target.closest("button.copy");\
    if(b&&navigator.clipboard){navigator.clipboard.writeText(b.getAttribute("data-pin"));b.textContent="copied";}});\
    setInterval(function(){var a=document.getElementById("auto");if(a&&a.checked)location.reload();},10000);
    """

  /// Sent with the page: nothing loads from anywhere, and only the script above runs.
  static let contentSecurityPolicy =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-"
    + SHA256.digest(Array(script.utf8)).base64
    + "'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

  func html() -> [UInt8] {
    var out = """
      <!doctype html>
      <html lang="en"><head><meta charset="utf-8">
      <meta name="viewport" content="width=device-width, initial-scale=1">
      <title>pinproxy</title>
      <style>body{font:14px/1.45 system-ui,sans-serif;margin:1.5em;color:#222}
      table{border-collapse:collapse;margin:.5em 0 1.5em}th,td{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
      th{background:#f3f3f3}code{font:12px ui-monospace,monospace;overflow-wrap:anywhere}
      td.rule code{white-space:nowrap;overflow-wrap:normal}
      .bad{color:#a00}.ok{color:#070}.warn{background:#fff4d6;padding:.5em 1em;border:1px solid #e0c060}
      section.refusal{border:1px solid #ddd;padding:.5em 1em;margin-bottom:1em}</style></head>
      <body>
      <h1>pinproxy</h1>

      """
    out += "<p>version \(e(status.version)) · configuration generation \(status.generation) · started "
    out += "\(time(status.startedAt)) · page made \(time(status.time))"
    out += status.draining ? " · <strong class=\"bad\">draining</strong>" : ""
    out += " · <label><input type=\"checkbox\" id=\"auto\" checked> refresh every 10 s</label></p>\n"
    warnings(into: &out)
    listeners(into: &out)
    localPrograms(into: &out)
    rules(into: &out)
    refusals(into: &out)
    upstream(into: &out)
    latency(into: &out)
    reloads(into: &out)
    out += "<script>\(OperatorPage.script)</script>\n</body></html>\n"
    return Array(out.utf8)
  }

  private func e(_ text: String) -> String { RefusalPage.escape(text) }

  private func time(_ date: Date) -> String {
    "<time datetime=\"\(date.formatted(.iso8601))\">\(date.formatted(.iso8601))</time>"
  }

  private func relative(_ date: Date) -> String { status.relative(date) }

  private func copyButton(_ pin: String) -> String {
    "<button type=\"button\" class=\"copy\" data-pin=\"\(e(pin))\">copy</button>"
  }

  private func rate(_ value: Double?) -> String { value.map { String(format: "%.2f", $0) } ?? "—" }

  private func warnings(into out: inout String) {
    guard !status.warnings.isEmpty else { return }
    out += "<div class=\"warn\" id=\"warnings\"><strong>Pin health</strong><ul>\n"
    for warning in status.warnings { out += "<li>\(e(warning))</li>\n" }
    out += "</ul></div>\n"
  }

  /// Programs on this host by requests and refusals in the last hour.
  private func localPrograms(into out: inout String) {
    guard let rows = status.localPrograms, !rows.isEmpty else { return }
    out += "<h2 id=\"local-programs\">Local programs (last hour)</h2>\n"
    out += "<table><tr><th>user</th><th>program</th><th>requests</th><th>refusals</th></tr>\n"
    for row in rows {
      out += "<tr><td><code>\(e(row.user))</code></td><td><code>\(e(row.program))</code></td>"
      out += "<td>\(row.requests)</td><td>\(row.refusals)</td></tr>\n"
    }
    out += "</table>\n"
  }

  private func listeners(into out: inout String) {
    out += "<h2 id=\"listeners\">Listeners</h2>\n<table><tr><th>name</th><th>address</th><th>mode</th>"
    out += "<th>connections</th><th>requests</th><th>requests/s</th><th>refusals</th><th>refusals/s</th>"
    out += "<th>refusal detail</th></tr>\n"
    for row in status.listeners {
      out += "<tr><td>\(e(row.name))</td><td><code>\(e(row.address))</code></td><td>\(e(row.mode))</td>"
      out += "<td>\(row.connections)</td><td>\(row.requests)</td><td>\(rate(row.requestsPerSecond))</td>"
      out +=
        "<td>\(row.refusals)</td><td>\(rate(row.refusalsPerSecond))</td><td>\(e(row.refusalDetail))</td></tr>\n"
    }
    out += "</table>\n"
  }

  private func rules(into out: inout String) {
    out +=
      "<h2 id=\"rules\">Rules</h2>\n<table><tr><th>rule</th><th>pinning</th><th>pins (what they match)</th>"
    out += "<th>pins expire</th><th>dynamic list</th><th>CT</th><th>revocation</th><th>last verdict</th>"
    out += "<th>refusals, last hour</th><th>pin health</th></tr>\n"
    for rule in status.rules {
      out += "<tr id=\"rule-\(e(rule.name))\"><td class=\"rule\"><code>\(e(rule.name))</code></td>"
      out += "<td>\(e(rule.pinningMode))<br>anchors: \(e(rule.anchors.joined(separator: ", ")))"
      if let parent = rule.parentProxy { out += "<br>through parent proxy \(e(parent))" }
      out += "</td><td>"
      for pin in rule.pins {
        out += "<div><code class=\"pin\">\(e(pin.pin))</code> \(copyButton(pin.pin))"
        if let subject = pin.matchedSubject {
          out += "<br>matches <code>\(e(subject))</code>"
          if let notAfter = pin.matchedNotAfter {
            out += ", expires \(time(notAfter)) (\(relative(notAfter)))"
          }
        } else if pin.backup {
          out += "<br>backup: not in the last accepted chain"
        }
        out += "</div>"
      }
      if rule.pins.isEmpty { out += "—" }
      out += "</td><td>"
      out += rule.pinsExpire.map { "\(time($0)) (\(relative($0)))" } ?? "—"
      out += "</td><td>"
      if let list = rule.dynamicList {
        out += "version \(list.version) (\(e(list.source))), \(list.entries) entries"
        out += list.lastUpdate.map { "<br>updated \(relative($0))" } ?? "<br>never updated"
        out += "<br>next update \(relative(list.nextUpdate))"
        if let failure = list.lastFailure {
          out += "<br><span class=\"bad\">last failure: \(e(failure))</span>"
        }
      } else {
        out += "—"
      }
      out += "</td><td>\(e(rule.transparency))</td><td>\(e(rule.revocation))</td><td>"
      if let verdict = rule.lastVerdict, let when = rule.lastVerdictTime {
        let style = verdict == "accepted" ? "ok" : "bad"
        out += "<span class=\"\(style)\">\(e(verdict))</span><br>\(time(when))"
      } else {
        out += "—"
      }
      out += "</td><td>\(rule.refusalsLastHour)</td><td>"
      if let health = rule.health {
        if let days = health.daysToExpiry, let subject = health.matchedSubject {
          out += "matched <code>\(e(subject))</code>, \(days) days to expiry<br>"
        }
        out += health.hasBackup ? "backup pin: yes" : "<span class=\"bad\">backup pin: no</span>"
        for warning in health.warnings { out += "<br><span class=\"bad\">\(e(warning))</span>" }
      } else {
        out += "—"
      }
      out += "</td></tr>\n"
    }
    out += "</table>\n"
  }

  private func refusals(into out: inout String) {
    out += "<h2 id=\"refusals\">Last refusals</h2>\n"
    if status.refusals.isEmpty { out += "<p>None since start.</p>\n" }
    for refusal in status.refusals {
      out += "<section class=\"refusal\" id=\"incident-\(e(refusal.incident))\">\n"
      out += "<p><strong class=\"bad code\">\(e(refusal.code))</strong> (\(refusal.status)) · "
      out += "incident <code class=\"incident\">\(e(refusal.incident))</code> · \(time(refusal.time))</p>\n"
      out += "<table><tr><th>client</th><td><code>\(e(refusal.client))</code>"
      if let user = refusal.clientUser {
        out += " user <code class=\"client-user\">\(e(user))</code>"
        out += " program <code class=\"client-program\">\(e(refusal.clientProgram ?? "unknown"))</code>"
      }
      if let listener = refusal.listener { out += " on \(e(listener))" }
      out += "</td></tr>\n<tr><th>host</th><td><code class=\"host\">\(e(refusal.host))</code></td></tr>\n"
      out +=
        "<tr><th>request</th><td><code class=\"path\">\(e(refusal.method)) \(e(refusal.path ?? "-"))</code>"
      if let agent = refusal.userAgent {
        out += "<br>User-Agent <code class=\"user-agent\">\(e(agent))</code>"
      }
      out += "</td></tr>\n"
      out += "<tr><th>rule</th><td class=\"rule\"><code>\(e(refusal.rule))</code></td></tr>\n"
      out += "<tr><th>reason</th><td class=\"reason\">\(e(refusal.reason))</td></tr>\n"
      if let yaml = refusal.adviceYAML {
        out += "<tr><th>fix</th><td class=\"advice\"><code class=\"advice-yaml\">\(e(yaml))</code> "
        out += "\(copyButton(yaml))<br>then reload (pinproxy reload, or SIGHUP)</td></tr>\n"
      }
      if let mode = refusal.pinningMode {
        out +=
          "<tr><th>expected</th><td>pinning \(e(mode)); anchors \(e(refusal.anchors.joined(separator: ", ")))"
        for pin in refusal.expectedPins {
          out += "<br><code class=\"expected-pin\">\(e(pin))</code> \(copyButton(pin))"
        }
        out += "</td></tr>\n"
      }
      out += "</table>\n"
      if !refusal.chain.isEmpty {
        out += "<table class=\"chain\"><tr><th>#</th><th>subject</th><th>issuer</th><th>valid</th>"
        out += "<th>SPKI pin</th><th>meets a pin</th></tr>\n"
        for (depth, certificate) in refusal.chain.enumerated() {
          let depthText = certificate.unsent == true ? "anchor (not sent)" : String(depth)
          out += "<tr><td>\(depthText)</td><td><code>\(e(certificate.subject))</code></td>"
          out += "<td><code>\(e(certificate.issuer))</code></td>"
          out += "<td>\(time(certificate.notBefore)) to \(time(certificate.notAfter))</td>"
          out +=
            "<td><code class=\"presented-pin\">\(e(certificate.pin))</code> \(copyButton(certificate.pin))"
          out += "<br>certificate sha256 <code>\(e(certificate.certificateSHA256))</code></td>"
          out += certificate.meetsPin ? "<td class=\"ok\">yes</td>" : "<td class=\"bad\">no</td>"
          out += "</tr>\n"
        }
        out += "</table>\n"
      }
      out += "</section>\n"
    }
  }

  private func upstream(into out: inout String) {
    let upstream = status.upstream
    out += "<h2 id=\"upstream\">Upstream pool</h2>\n<p>sockets open \(upstream.socketsOpen) of "
    out += "\(upstream.socketLimit) · HTTP/2 streams in flight \(upstream.http2StreamsInFlight)</p>\n"
    out +=
      "<table><tr><th>upstream</th><th>protocol</th><th>connections</th><th>streams in flight</th></tr>\n"
    for pool in upstream.pools {
      out += "<tr><td><code>\(e(pool.key))</code></td><td>\(e(pool.protocol))</td>"
      out += "<td>\(pool.connections)</td><td>\(pool.streamsInFlight)</td></tr>\n"
    }
    if upstream.pools.isEmpty { out += "<tr><td colspan=\"4\">no pooled connections</td></tr>\n" }
    out += "</table>\n"
  }

  private func latency(into out: inout String) {
    out += "<h2 id=\"latency\">Latency</h2>\n<table><tr><th>histogram</th><th>series</th><th>count</th>"
    out += "<th>p50</th><th>p90</th><th>p99</th></tr>\n"
    func ms(_ seconds: Double?) -> String { seconds.map { String(format: "%.2f ms", $0 * 1000) } ?? "—" }
    for row in status.latency {
      out += "<tr><td><code>\(e(row.name))</code></td><td>\(e(row.labels))</td><td>\(row.count)</td>"
      out += "<td>\(ms(row.p50))</td><td>\(ms(row.p90))</td><td>\(ms(row.p99))</td></tr>\n"
    }
    out += "</table>\n"
  }

  private func reloads(into out: inout String) {
    out += "<h2 id=\"reloads\">Reloads</h2>\n"
    if status.reloads.isEmpty { return out += "<p>None since start.</p>\n" }
    out += "<table><tr><th>time</th><th>result</th><th>generation</th><th>error</th></tr>\n"
    for reload in status.reloads {
      out += "<tr><td>\(time(reload.time))</td><td class=\"\(reload.result == "ok" ? "ok" : "bad")\">"
      out += "\(e(reload.result))</td><td>\(reload.generation)</td>"
      out += "<td><code>\(e(reload.error ?? ""))</code>"
      for warning in reload.warnings ?? [] { out += "<br>warning: \(e(warning))" }
      out += "</td></tr>\n"
    }
    out += "</table>\n"
  }
}
