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
    metrics: metrics, maxDuration: .seconds(3), maxIterations: 1_000_000)

  Benchmark("Full evaluation (3-cert RSA-2048 chain, publicKey pin)", configuration: configuration) {
    benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(TrustEvaluator.evaluate(chain, host: host, policy: policy, verifier: compiled, at: now))
    }
  }

  let engine = TrustEngine(cache: FingerprintCache(capacity: 8192))
  precondition(compiled.evaluate(chain, host: host, engine: engine, at: now).isTrusted)

  Benchmark("Cache hit (same chain, through TrustEngine)", configuration: configuration) { benchmark in
    for _ in benchmark.scaledIterations {
      blackHole(
        engine.evaluate(
          chain, host: host, policy: policy, identity: compiled.identity, verifier: compiled, at: now))
    }
  }

  // Throughput of the cache alone, with many distinct keys spread over shards.
  let cache = FingerprintCache(capacity: 8192)
  let keys = (0..<1024).map { index in
    FingerprintCache.Key(
      policy: PolicyIdentity(generation: 1, rule: .domain(index % 8)),
      host: TrustHost("host\(index).example")!,
      chain: chain)
  }
  let acceptance = Acceptance(basis: .validChain, validUntil: .distantFuture)
  for key in keys { cache.insert(key, acceptance: acceptance, at: now) }
  // One iteration = 1000 lookups per thread; lookups/s = throughput x 1000 x threads.
  let throughput = Benchmark.Configuration(metrics: [.wallClock, .throughput], maxDuration: .seconds(3))

  Benchmark("Cache lookups, 1 thread (1000 per iteration)", configuration: throughput) { benchmark in
    for _ in benchmark.scaledIterations {
      for index in 0..<1000 { blackHole(cache.lookup(keys[index & 1023], at: now)) }
    }
  }

  Benchmark("Cache lookups, 2 threads (1000 each per iteration)", configuration: throughput) { benchmark in
    for _ in benchmark.scaledIterations {
      DispatchQueue.concurrentPerform(iterations: 2) { thread in
        for index in 0..<1000 { blackHole(cache.lookup(keys[(index + thread * 512) & 1023], at: now)) }
      }
    }
  }
}
