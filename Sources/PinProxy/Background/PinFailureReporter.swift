import Foundation
import PinEventLoop
import PinTLS
import PinTrust

/// Sends pin-failure reports (`report.uris`) and logs what report-only let
/// through. Never on a request's path: a report is queued and posted later
/// on `loop` through the upstream machinery, under the rule of each report
/// URI's host. Bounded everywhere:
/// - at most `maximumInFlight` posts at once and `maximumQueued` waiting;
///   beyond that a report is dropped and counted, never queued without end;
/// - a report identical to one sent in the last 24 hours (TrustKit's
///   de-duplication key) is not sent again; the table holds at most
///   `maximumRemembered` keys, forgetting the oldest first.
/// Posts of reports go through a dialer without a reporter, so a failing
/// report URI can never cause a report about itself.
final class PinFailureReporter: PinFailureReporting {
  static let maximumQueued = 64
  static let maximumInFlight = 4
  static let maximumRemembered = 4096
  static let deduplicationWindow: TimeInterval = 24 * 3600

  private struct State {
    var queue: [(InternalURL, [UInt8])] = []
    var inFlight = 0
    var sent: [Digest256: Date] = [:]
  }

  private let state = Locked(State())
  private let loop: EventLoop
  private let logger: ProxyLogger
  private let metrics: ProxyMetrics
  private let makeDialer: @Sendable () -> UpstreamDialer
  let vendorID: String

  init(
    loop: EventLoop, logger: ProxyLogger, metrics: ProxyMetrics, vendorID: String,
    makeDialer: @escaping @Sendable () -> UpstreamDialer
  ) {
    self.loop = loop
    self.logger = logger
    self.metrics = metrics
    self.vendorID = vendorID
    self.makeDialer = makeDialer
  }

  /// A refused chain under a rule with `report.uris`.
  func refused(_ failure: TrustFailure, presented: [X509Certificate], key: UpstreamKey, route: UpstreamRoute)
  {
    guard !route.reportURIs.isEmpty else { return }
    submit(
      PinFailureReport(failure: failure, presented: presented, key: key, route: route, at: Date()), route)
  }

  /// Report-only let a pin failure through: logged and counted as a refusal
  /// that did not happen, and reported.
  func waived(_ failure: TrustFailure, presented: [X509Certificate], key: UpstreamKey, route: UpstreamRoute) {
    metrics.pinFailuresWaived.increment([failure.code.rawValue, route.ruleName])
    logger.log(
      .warning, "pin-failure-waived",
      [
        "upstream": key.description, "rule": route.ruleName, "code": failure.code.rawValue,
        "reason": failure.reason, "note": "report-only (report.enforce: false): would have refused",
      ])
    guard !route.reportURIs.isEmpty else { return }
    submit(
      PinFailureReport(failure: failure, presented: presented, key: key, route: route, at: Date()), route)
  }

  private func submit(_ report: PinFailureReport, _ route: UpstreamRoute) {
    let key = report.deduplicationKey
    let now = report.time
    // A repeat costs one digest and a lookup: the body is built only for a
    // report that will be sent.
    let isNew = state.withLock { state -> Bool in
      if let last = state.sent[key], now.timeIntervalSince(last) < PinFailureReporter.deduplicationWindow {
        return false
      }
      if state.sent.count >= PinFailureReporter.maximumRemembered {
        state.sent = state.sent.filter {
          now.timeIntervalSince($0.value) < PinFailureReporter.deduplicationWindow
        }
        while state.sent.count >= PinFailureReporter.maximumRemembered,
          let oldest = state.sent.min(by: { $0.value < $1.value })
        {
          state.sent[oldest.key] = nil
        }
      }
      state.sent[key] = now
      return true
    }
    guard isNew else { return metrics.pinReports.increment(["deduplicated"]) }
    let body = report.json(vendorID: vendorID)
    let dropped = state.withLock { state -> Int in
      var dropped = 0
      for url in route.reportURIs {
        if state.queue.count < PinFailureReporter.maximumQueued {
          state.queue.append((url, body))
        } else {
          dropped += 1
        }
      }
      return dropped
    }
    for _ in 0..<dropped { metrics.pinReports.increment(["dropped"]) }
    pump()
  }

  /// Starts posts while there are queued reports and room in flight.
  private func pump() {
    while let (url, body) = state.withLock({ state -> (InternalURL, [UInt8])? in
      guard state.inFlight < PinFailureReporter.maximumInFlight, !state.queue.isEmpty else { return nil }
      state.inFlight += 1
      return state.queue.removeFirst()
    }) {
      let request = InternalRequest(
        method: "POST", url: url, headers: [("Content-Type", "application/json")], body: body, deadline: 30,
        maximumBodyBytes: 64 * 1024)
      InternalExchange.start(request, dialer: makeDialer(), on: loop) { [self] result in
        switch result {
        case .success(let response) where (200..<300).contains(response.status):
          metrics.pinReports.increment(["sent"])
        case .success(let response):
          metrics.pinReports.increment(["failed"])
          logger.log(
            .warning, "pin-report-failed", ["uri": url.description, "status": String(response.status)])
        case .failure(let failure):
          metrics.pinReports.increment(["failed"])
          logger.log(
            .warning, "pin-report-failed",
            ["uri": url.description, "code": failure.code.rawValue, "reason": failure.reason])
        }
        state.withLock { $0.inFlight -= 1 }
        pump()
      }
    }
  }

  /// A stable identifier of this installation for `app-vendor-id`: derived
  /// from /etc/machine-id (hashed, so the id itself is not disclosed), or
  /// random for the process when there is none.
  static func installationID() -> String {
    var seed = UUID().uuidString
    if let machine = try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8) {
      seed = "pinproxy\n" + machine.trimmingCharacters(in: .whitespacesAndNewlines)
    }
    let bytes = SHA256.digest(Array(seed.utf8)).bytes
    let hex = bytes.prefix(16).map { String(format: "%02X", $0) }.joined()
    let parts = [0..<8, 8..<12, 12..<16, 16..<20, 20..<32].map { range in
      String(
        hex[
          hex.index(
            hex.startIndex, offsetBy: range.lowerBound)..<hex.index(
              hex.startIndex, offsetBy: range.upperBound)])
    }
    return parts.joined(separator: "-")
  }
}
