import Dispatch
import PinTrust
import Synchronization

/// A Prometheus histogram family with fixed series, one set of cells per
/// event loop, merged when scraped.
///
/// The hot path takes no lock and shares no cache line with another loop: a
/// loop observes only into its own cells, and since a loop is the only writer
/// of its cells, an observation is a relaxed load and store per cell (plain
/// moves on x86-64 and arm64) rather than an atomic read-modify-write. A
/// scrape reads every loop's cells with relaxed loads; it may miss an
/// observation made while it reads, never tear a value. The count of a
/// series is the sum of its buckets, so a scrape's buckets and count always
/// agree.
///
/// Observations made off the loops (a dynamic pin list fetch) use
/// `observeShared`, which takes a lock: they are rare.
///
/// Built with `-D PINPROXY_NO_HISTOGRAMS` (Benchmarks/histogram-overhead.sh)
/// observing does nothing, so the cost of the histograms can be measured
/// against a build without them.
final class LatencyHistogram: Sendable {
  let name: String
  let help: String
  let labelNames: [String]
  /// The label values of each series, in the order of `labelNames`.
  let series: [[String]]
  /// Upper bounds in seconds, ascending; `+Inf` is implicit.
  let bounds: [Double]
  private let boundNanoseconds: [UInt64]
  private let loops: [Cells]
  private let shared: Cells
  private let sharedLock = Locked(())
  /// Cells per series: one per bucket (`+Inf` last), then the sum in nanoseconds.
  private let stride: Int

  /// Request-scale bounds: 0.5 ms to 30 s.
  static let requestBounds: [Double] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
  ]
  /// A trust evaluation: 10 µs (a cache hit) to 1 s (a miss under load).
  static let evaluationBounds: [Double] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1,
  ]

  init(_ name: String, _ help: String, labels: [String], series: [[String]], bounds: [Double], loops: Int) {
    self.name = name
    self.help = help
    labelNames = labels
    self.series = series
    self.bounds = bounds
    boundNanoseconds = bounds.map { UInt64(($0 * 1e9).rounded()) }
    stride = bounds.count + 2
    let count = series.count * stride
    self.loops = (0..<max(1, loops)).map { _ in Cells(count: count) }
    shared = Cells(count: count)
  }

  /// Records `nanoseconds` in series `index` on loop `loop`'s cells. Only
  /// that loop may call this with that index (see the type's comment).
  @inline(__always)
  func observe(_ index: Int, nanoseconds: UInt64, loop: Int) {
    #if !PINPROXY_NO_HISTOGRAMS
      record(index, nanoseconds, into: loops[loop % loops.count])
    #endif
  }

  /// The same, from any thread: under a lock, into cells of their own.
  func observeShared(_ index: Int, nanoseconds: UInt64) {
    #if !PINPROXY_NO_HISTOGRAMS
      sharedLock.withLock { _ in record(index, nanoseconds, into: shared) }
    #endif
  }

  private func record(_ index: Int, _ nanoseconds: UInt64, into cells: Cells) {
    var bucket = 0
    while bucket < boundNanoseconds.count, nanoseconds > boundNanoseconds[bucket] { bucket += 1 }
    let base = index * stride
    cells.bump(base + bucket, by: 1)
    cells.bump(base + bounds.count + 1, by: nanoseconds)
  }

  /// One series merged over every loop: bucket counts (not cumulative,
  /// `+Inf` last), their total and the sum in seconds.
  struct Totals {
    var buckets: [UInt64]
    var count: UInt64 { buckets.reduce(0, &+) }
    var sumSeconds: Double
  }

  func totals(_ index: Int) -> Totals {
    var buckets = [UInt64](repeating: 0, count: bounds.count + 1)
    var sum: UInt64 = 0
    let base = index * stride
    for cells in loops + [shared] {
      for bucket in 0..<buckets.count { buckets[bucket] &+= cells.load(base + bucket) }
      sum &+= cells.load(base + bounds.count + 1)
    }
    return Totals(buckets: buckets, sumSeconds: Double(sum) / 1e9)
  }

  /// The family in the text format: cumulative `_bucket` lines with `le`,
  /// then `_sum` and `_count`, per series.
  func render(into out: inout String, skippingEmpty: Bool = false) {
    out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
    for (index, values) in series.enumerated() {
      let totals = totals(index)
      if skippingEmpty && totals.count == 0 { continue }
      let labels = zip(labelNames, values).map { "\($0)=\"\(ProxyMetrics.escape($1))\"" }
      let prefix = labels.joined(separator: ",")
      let comma = prefix.isEmpty ? "" : ","
      var cumulative: UInt64 = 0
      for (bucket, count) in totals.buckets.enumerated() {
        cumulative &+= count
        let bound = bucket < bounds.count ? LatencyHistogram.format(bounds[bucket]) : "+Inf"
        out += "\(name)_bucket{\(prefix)\(comma)le=\"\(bound)\"} \(cumulative)\n"
      }
      let braces = prefix.isEmpty ? "" : "{\(prefix)}"
      out += "\(name)_sum\(braces) \(LatencyHistogram.format(totals.sumSeconds))\n"
      out += "\(name)_count\(braces) \(cumulative)\n"
    }
  }

  /// A bound or sum as Prometheus writes floats: no exponent for these sizes.
  static func format(_ value: Double) -> String {
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    var text = String(value)
    if text.contains("e") { text = String(format: "%.9f", value) }
    return text
  }

  /// Counters in one allocation, each an `Atomic` so that a scrape on
  /// another thread reads them without a data race.
  private final class Cells: Sendable {
    private nonisolated(unsafe) let base: UnsafeMutablePointer<Atomic<UInt64>>
    private let count: Int

    init(count: Int) {
      self.count = count
      base = .allocate(capacity: count)
      for index in 0..<count { (base + index).initialize(to: Atomic(0)) }
    }

    deinit {
      _ = base.deinitialize(count: count)
      base.deallocate()
    }

    /// Single writer: a relaxed load and store, no read-modify-write.
    @inline(__always)
    func bump(_ index: Int, by delta: UInt64) {
      let cell = base + index
      cell.pointee.store(cell.pointee.load(ordering: .relaxed) &+ delta, ordering: .relaxed)
    }

    func load(_ index: Int) -> UInt64 { (base + index).pointee.load(ordering: .relaxed) }
  }
}

extension DispatchTime {
  /// Nanoseconds since `start` (an earlier `uptimeNanoseconds`).
  static func nanoseconds(since start: UInt64) -> UInt64 {
    DispatchTime.now().uptimeNanoseconds &- start
  }
}
