import Foundation
import XCTest

@testable import PinProxy

/// Per-loop histogram cells merged on render, in the Prometheus text format;
/// quantiles as `histogram_quantile` interpolates them; the refusal ring's bound.
final class LatencyHistogramTests: XCTestCase {
  func makeHistogram() -> LatencyHistogram {
    LatencyHistogram(
      "test_seconds", "A test.", labels: ["kind"], series: [["a"], ["b"]], bounds: [0.001, 0.01, 0.1],
      loops: 2)
  }

  func testLoopsAreMergedAndBucketsAreCumulative() {
    let histogram = makeHistogram()
    histogram.observe(0, nanoseconds: 500_000, loop: 0)  // 0.5 ms
    histogram.observe(0, nanoseconds: 5_000_000, loop: 1)  // 5 ms
    histogram.observe(0, nanoseconds: 2_000_000_000, loop: 1)  // 2 s: +Inf
    histogram.observeShared(1, nanoseconds: 50_000_000)
    var text = ""
    histogram.render(into: &text)
    XCTAssertEqual(
      text,
      """
      # HELP test_seconds A test.
      # TYPE test_seconds histogram
      test_seconds_bucket{kind="a",le="0.001"} 1
      test_seconds_bucket{kind="a",le="0.01"} 2
      test_seconds_bucket{kind="a",le="0.1"} 2
      test_seconds_bucket{kind="a",le="+Inf"} 3
      test_seconds_sum{kind="a"} 2.0055
      test_seconds_count{kind="a"} 3
      test_seconds_bucket{kind="b",le="0.001"} 0
      test_seconds_bucket{kind="b",le="0.01"} 0
      test_seconds_bucket{kind="b",le="0.1"} 1
      test_seconds_bucket{kind="b",le="+Inf"} 1
      test_seconds_sum{kind="b"} 0.05
      test_seconds_count{kind="b"} 1

      """)
    var skipping = ""
    makeHistogram().render(into: &skipping, skippingEmpty: true)
    XCTAssertFalse(skipping.contains("_bucket"), "no series before an observation")
  }

  func testQuantilesInterpolateWithinTheirBucket() {
    let histogram = makeHistogram()
    for _ in 0..<10 { histogram.observe(0, nanoseconds: 5_000_000, loop: 0) }
    let totals = histogram.totals(0)
    // All ten in (0.001, 0.01]: the median is halfway through it.
    XCTAssertEqual(histogram.quantile(0.5, totals)!, 0.0055, accuracy: 1e-9)
    XCTAssertNil(histogram.quantile(0.5, histogram.totals(1)))
  }

  func refusal(_ incident: String, client: String) -> RecordedRefusal {
    RecordedRefusal(
      incident: incident, time: Date(), client: client, clientKey: ClientKey.of(client), listener: nil,
      method: "GET", host: "h", path: nil,
      userAgent: nil, rule: "-", code: "bad-request", status: 400, reason: "r", chain: [], expected: nil)
  }

  func testTheRefusalRingKeepsTheNewestHundred() {
    let log = RefusalLog()
    // Six clients, so that none of them reaches its own bound.
    for index in 0..<(RefusalLog.capacity + 20) {
      log.record(refusal(String(index), client: "192.0.2.\(index % 6):1000"))
    }
    let recent = log.recent()
    XCTAssertEqual(recent.count, RefusalLog.capacity)
    XCTAssertEqual(recent.first?.incident, String(RefusalLog.capacity + 19))
    XCTAssertEqual(recent.last?.incident, "20")
    XCTAssertEqual(RefusalLog.incidentID().count, 12)
  }

  /// One client provoking refusals by the thousand keeps at most its own
  /// share: another client's refusal stays on the page.
  func testOneClientCannotPushAnothersRefusalsOut() {
    let log = RefusalLog()
    log.record(refusal("other", client: "198.51.100.9:4000"))
    for index in 0..<1000 { log.record(refusal("flood-\(index)", client: "203.0.113.5:\(1024 + index)")) }
    var recent = log.recent()
    XCTAssertEqual(recent.count, RefusalLog.capacity)
    XCTAssertEqual(recent.last?.incident, "other")
    XCTAssertEqual(recent.first?.incident, "flood-999", "the flooding client's newest stay, its oldest go")
    XCTAssertEqual(recent.filter { $0.client.hasPrefix("203.0.113.5:") }.count, RefusalLog.capacity - 1)
    // A third client's refusals take the flooder's room, never the other's.
    for index in 0..<RefusalLog.perClient {
      log.record(refusal("third-\(index)", client: "192.0.2.44:\(index)"))
    }
    recent = log.recent()
    XCTAssertTrue(recent.contains { $0.incident == "other" })
    XCTAssertEqual(recent.filter { $0.incident.hasPrefix("third-") }.count, RefusalLog.perClient)
  }

  /// On a loopback deployment every refusal has one client key: the page
  /// keeps all 100 of them, the per-client bound applying only when another
  /// client's refusal needs the room.
  func testOneClientAloneKeepsTheWholeLog() {
    let log = RefusalLog()
    for index in 0..<150 { log.record(refusal("local-\(index)", client: "127.0.0.1:\(2000 + index)")) }
    var recent = log.recent()
    XCTAssertEqual(recent.count, RefusalLog.capacity)
    XCTAssertEqual(recent.first?.incident, "local-149")
    XCTAssertEqual(recent.last?.incident, "local-50")
    // Another client arrives: it takes the room from the one holding most.
    log.record(refusal("browser", client: "192.0.2.7:5000"))
    recent = log.recent()
    XCTAssertEqual(recent.count, RefusalLog.capacity)
    XCTAssertEqual(recent.first?.incident, "browser")
    XCTAssertEqual(recent.last?.incident, "local-51", "the loopback client's oldest went")
  }
}
