import Benchmark
import Foundation
import PinTLS
import PinTrust

/// What interception costs: minting a leaf, finding a minted one, and the
/// client-facing TLS handshake a CONNECT adds (in memory, no sockets), next
/// to the upstream handshake every connection pays anyway.
let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
  .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Tests/Fixtures/pki").path

/// Moves bytes both ways until both sides finished the handshake.
func handshake(_ client: TLSEngine, _ server: TLSEngine) {
  for _ in 0..<10 {
    let clientDone = (try? client.handshake()) == .complete
    server.receive(client.pendingOutput())
    let serverDone = (try? server.handshake()) == .complete
    client.receive(server.pendingOutput())
    if clientDone && serverDone && !client.hasPendingOutput && !server.hasPendingOutput { return }
  }
}

let benchmarks: @Sendable () -> Void = {
  let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
    "bench-ca-\(UUID().uuidString)"
  ).path
  let ca: LocalCA
  let interception: InterceptionContext
  let client: TLSClientContext
  let upstreamServer: TLSServerContext
  do {
    try LocalCA.create(in: directory)
    ca = try LocalCA.load(certificate: directory + "/ca.pem", key: directory + "/ca.key", cacheSize: 1 << 20)
    interception = try InterceptionContext(ca: ca, minimumVersion: .tls12, ciphers: "")
    client = try TLSClientContext(minimumVersion: .tls12, requiresForwardSecrecy: true)
    upstreamServer = try TLSServerContext(
      certificateChain: fixtures + "/httpbin-chain.pem", privateKey: fixtures + "/httpbin.key")
  } catch {
    fatalError("benchmark setup: \(error)")
  }
  let host = TrustHost("api.bank.example")!
  _ = try? ca.leaf(for: host)
  // BENCHMARK_SMOKE=1 (CI): a few iterations of each, to prove they still build and run.
  let smoke = ProcessInfo.processInfo.environment["BENCHMARK_SMOKE"] != nil
  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, .throughput], maxDuration: smoke ? .milliseconds(50) : .seconds(3),
    maxIterations: smoke ? 5 : 100_000)
  nonisolated(unsafe) var counter = 0

  Benchmark(
    "Mint the leaves of a new host (P-256 and RSA-2048 leaves, two CA signatures)",
    configuration: configuration
  ) { benchmark in
    for _ in benchmark.scaledIterations {
      counter += 1
      blackHole(try? ca.leaf(for: TrustHost("h\(counter).mint.example")!))
    }
  }

  Benchmark("Find a minted leaf (cached host)", configuration: configuration) { benchmark in
    for _ in benchmark.scaledIterations { blackHole(try? ca.leaf(for: host)) }
  }

  Benchmark(
    "Client-side handshake of an intercepted CONNECT (cached leaf, TLS 1.3)", configuration: configuration
  ) {
    benchmark in
    for _ in benchmark.scaledIterations {
      guard let leaves = try? ca.leaves(for: host),
        let server = try? interception.makeEngine(presenting: leaves),
        let engine = try? client.makeEngine(serverName: .dns("api.bank.example"), resuming: nil)
      else { fatalError("engine setup") }
      handshake(engine, server)
    }
  }

  Benchmark(
    "Upstream-style handshake for comparison (RSA-2048 server, TLS 1.3)", configuration: configuration
  ) {
    benchmark in
    for _ in benchmark.scaledIterations {
      guard let server = try? upstreamServer.makeEngine(),
        let engine = try? client.makeEngine(serverName: .dns("httpbin.org"), resuming: nil)
      else { fatalError("engine setup") }
      handshake(engine, server)
    }
  }
}
