import Benchmark
import Dispatch
import Foundation
import PinTLS
import PinTrust

/// Full evaluation of a three-certificate RSA-2048 chain against a
/// fingerprint-cache hit for the same chain, cache throughput from one and two
/// threads, and the allocations of the hit path. The clock is fixed so the
/// committed test PKI stays valid.
let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/pki").path
let now = Date(timeIntervalSince1970: 1_780_272_000)
/// BENCHMARK_SMOKE=1 (CI): a few iterations of each, to prove they still build and run.
let smoke = ProcessInfo.processInfo.environment["BENCHMARK_SMOKE"] != nil

func load(_ name: String) -> [X509Certificate] {
  do {
    return try CertificateFile.load(fixtures + "/" + name)
  } catch {
    fatalError("benchmark fixture \(name): \(error)")
  }
}

let benchmarks: @Sendable () -> Void = {
  let chain = PresentedChain(load("httpbin-fullchain.pem").map(\.der))
  let host = TrustHost("httpbin.org")!
  let pin = load("int-a.pem")[0].value().spkiFingerprint
  let policy = SecurityPolicy(pinningMode: .publicKey, pinnedPublicKeyHashes: [pin])
  let registry = AnchorSetRegistry(systemOverride: load("root-a.pem"))
  let compiled: CompiledPolicy
  do {
    compiled = try CompiledPolicy(
      policy: policy, identity: PolicyIdentity(generation: 1, rule: .domain(0)), registry: registry)
  } catch {
    fatalError("\(error)")
  }
  precondition(
    TrustEvaluator.evaluate(chain, host: host, policy: policy, verifier: compiled, at: now).isTrusted)

  // No .cpuTotal: sampling it allocates inside the harness and would hide
  // whether the measured code allocates.
  let metrics: [BenchmarkMetric] = [.wallClock, .throughput, .mallocCountTotal]
  let configuration = Benchmark.Configuration(
    metrics: metrics, maxDuration: smoke ? .milliseconds(50) : .seconds(3),
    maxIterations: smoke ? 5 : 1_000_000)

  Benchmark("Full evaluation (3-cert RSA-2048 chain, publicKey pin)", configuration: configuration) {
    benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(TrustEvaluator.evaluate(chain, host: host, policy: policy, verifier: compiled, at: now))
    }
  }

  let engine = TrustEngine(cache: FingerprintCache(capacity: 8192))
  precondition(compiled.evaluate(chain, host: host, engine: engine, at: now).isTrusted)

  // 1000 hits per iteration, so the harness's own per-iteration work (two
  // clock readings, its statistics) is not counted as the cache's: read the
  // scaled (*) time with --scale, or divide by 1000.
  var perThousand = configuration
  perThousand.scalingFactor = .kilo
  perThousand.maxIterations = smoke ? 5 : 10_000
  Benchmark("Cache hit (same chain, through TrustEngine, 1000 per iteration)", configuration: perThousand) {
    benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(
        engine.evaluate(
          chain, host: host, policy: policy, identity: compiled.identity, verifier: compiled, at: now))
    }
  }

  // What a new handshake brings: its own copy of a chain already cached, so
  // the key's chain is compared byte for byte with the stored one.
  let copies = (0..<64).map { _ in PresentedChain(chain.certificates.map { $0.map { $0 } }) }
  Benchmark(
    "Cache hit (a copy of the chain, through TrustEngine, 1000 per iteration)", configuration: perThousand
  ) {
    benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(
        engine.evaluate(
          copies[benchmark.currentIteration & 63], host: host, policy: policy, identity: compiled.identity,
          verifier: compiled, at: now))
    }
  }

  // Throughput of the cache alone, with many distinct keys spread over
  // shards. The daemon gives each event loop a partition of its own
  // (`TrustEngine(partitions:)`); thread N here is loop N.
  let partitioned = TrustEngine(partitions: 2, capacity: 16384)
  let cache = partitioned.caches[0]
  // Each thread looks up with keys of its own, whose chains are copies of
  // the stored ones: every handshake brings its own chain, so two loops never
  // share a key's storage (and its reference count) the way one array would.
  func keys(for thread: Int) -> [FingerprintCache.Key] {
    (0..<1024).map { index in
      FingerprintCache.Key(
        policy: PolicyIdentity(generation: 1, rule: .domain(index % 8)),
        host: TrustHost("host\(index).example")!,
        chain: PresentedChain(chain.certificates.map { $0.map { $0 } }))
    }
  }
  let threadKeys = [keys(for: 0), keys(for: 1)]
  let acceptance = Acceptance(basis: .validChain, validUntil: .distantFuture)
  for partition in partitioned.caches {
    for key in keys(for: 2) { partition.insert(key, acceptance: acceptance, at: now) }
  }
  // One iteration = 100,000 lookups per thread, each thread a thread of its
  // own started for the iteration (its start is under 0.1% of the time):
  // lookups/s = throughput x 100,000 x threads.
  let throughput = Benchmark.Configuration(
    metrics: [.wallClock, .throughput], maxDuration: smoke ? .milliseconds(50) : .seconds(3),
    maxIterations: smoke ? 2 : 1_000)
  @Sendable func lookups(in cache: FingerprintCache, thread: Int) {
    let keys = threadKeys[thread]
    for index in 0..<100_000 { blackHole(cache.lookup(keys[(index + thread * 512) & 1023], at: now)) }
  }
  Benchmark("Cache lookups, 1 thread (100,000 per iteration)", configuration: throughput) { benchmark in
    for _ in benchmark.scaledIterations { runOnThreads(1) { lookups(in: cache, thread: $0) } }
  }

  // Both threads look up the same hosts and chains (offset by half the
  // table): two loops serving the same origins, each in its own partition.
  Benchmark(
    "Cache lookups, 2 threads, a partition each (100,000 each per iteration)", configuration: throughput
  ) {
    benchmark in
    for _ in benchmark.scaledIterations {
      runOnThreads(2) { lookups(in: partitioned.caches[$0], thread: $0) }
    }
  }

  // For comparison, what the partitions avoid: both threads in one cache.
  Benchmark(
    "Cache lookups, 2 threads, one shared cache (100,000 each per iteration)", configuration: throughput
  ) {
    benchmark in
    for _ in benchmark.scaledIterations { runOnThreads(2) { lookups(in: cache, thread: $0) } }
  }
}

/// Runs `body(thread)` on `count` new threads and waits for all of them.
func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
  let done = DispatchSemaphore(value: 0)
  for thread in 0..<count {
    Thread {
      body(thread)
      done.signal()
    }.start()
  }
  for _ in 0..<count { done.wait() }
}
