// swift-tools-version: 6.1
import PackageDescription

// Dependencies point one way (docs/ARCHITECTURE.md): PinTrust ← PinTLS ← PinProxy ← pinproxy,
// PinTrust ← PinConfig ← PinProxy; PinHTTP and PinEventLoop (over CLinuxEpoll) stand alone. PinTrust is pure
// Swift: it never sees an OpenSSL pointer. PinConfig never sees a socket or a TLS context.

// The data path's modules (PinEventLoop, PinHTTP, PinProxy) drop the *dynamic* exclusivity checks in release
// builds only (issue 57, part 7). Why: every stored property of a class touched per request (the session, the
// connection, the pool) paid swift_beginAccess/endAccess — about 8k of the 89k instructions of our own code per
// keep-alive request and 16k per new connection (Benchmarks/instructions-per-request.py). What keeps it safe: the
// compile-time exclusivity diagnostics stay on in every build, and debug and fuzz builds keep the dynamic checks
// too — every unit, end-to-end, fuzz and sanitizer run of scripts/test.sh (the ThreadSanitizer suites among them),
// so an overlapping access on a tested path fails a test. Bounds, overflow and precondition checks stay in every
// build (never -Ounchecked: every byte is hostile).
//
// Their release builds, and PinTLS's, also keep large values in registers: Swift 6's IRGen moves a "large
// loadable" value (a parser event, a machine, an action of an enum with many payloads) to memory and copies and
// destroys it through its type's value witnesses, a call through type metadata each time; per keep-alive request
// that cost about 3k instructions, most of it memcpy (issue 57). `-disable-large-loadable-types-reg2mem` turns that
// one IRGen pass off, the code generation Swift used before it; it checks nothing less. `-cross-module-optimization`
// lets generic code of these modules be specialized and inlined where another module calls it (a session's calls
// into the parser, the queues and the loop): about 2.4k instructions per new connection, for some 17 s more of
// release build. Neither removes a check.
let registerValues: [SwiftSetting] = [
  .unsafeFlags(
    ["-Xfrontend", "-disable-large-loadable-types-reg2mem", "-cross-module-optimization"],
    .when(configuration: .release))
]
let dataPathSettings: [SwiftSetting] =
  registerValues
  + (Context.environment["PINPROXY_FUZZ_TARGETS"] != nil
    ? [] : [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))])
let package = Package(
  name: "pinproxy",
  platforms: [.macOS(.v14)],
  products: [
    .executable(name: "pinproxy", targets: ["pinproxy"]),
    .library(name: "PinTrust", targets: ["PinTrust"]),
    .library(name: "PinTLS", targets: ["PinTLS"]),
    .library(name: "PinHTTP", targets: ["PinHTTP"]),
    .library(name: "PinHTTP2", targets: ["PinHTTP2"]),
    .library(name: "PinConfig", targets: ["PinConfig"]),
    .library(name: "PinAppFormats", targets: ["PinAppFormats"]),
    .library(name: "PinProxy", targets: ["PinProxy"]),
    .library(name: "PinEventLoop", targets: ["PinEventLoop"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
    .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
  ] + benchmarkDependencies,
  targets: [
    .systemLibrary(
      name: "COpenSSL",
      pkgConfig: "openssl",
      providers: [.apt(["libssl-dev"])]
    ),
    .target(name: "PinTrust"),
    .target(name: "PinTLS", dependencies: ["COpenSSL", "PinTrust"], swiftSettings: registerValues),
    // libxcrypt, for the htpasswd hashes of proxy authentication.
    .systemLibrary(name: "CCrypt", providers: [.apt(["libcrypt-dev"])]),
    .target(name: "PinHTTP", swiftSettings: dataPathSettings),
    .systemLibrary(name: "CNghttp2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
    // HTTP/2 framing over nghttp2, memory-driven (no sockets): a codec that
    // turns bytes into events and submissions into bytes.
    .target(name: "PinHTTP2", dependencies: ["CNghttp2", "PinHTTP"]),
    // epoll and accept4, which Glibc's Swift module does not export (a header of static inline shims).
    .target(name: "CLinuxEpoll"),
    .target(name: "PinEventLoop", dependencies: ["CLinuxEpoll"], swiftSettings: dataPathSettings),
    // The configuration model and its YAML reader: no TLS, no sockets, no
    // runtime types. The data path sees only the parsed values.
    .target(name: "PinConfig", dependencies: ["PinTrust", .product(name: "Yams", package: "Yams")]),
    .target(
      name: "PinProxy",
      dependencies: [
        "PinTrust", "PinTLS", "PinHTTP", "PinHTTP2", "PinEventLoop", "PinConfig", "CCrypt",
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: dataPathSettings
    ),
    // `pinproxy import`: app configurations (ATS, TrustKit, Android) to rules. Pure.
    .target(name: "PinAppFormats", dependencies: ["PinConfig", "PinTrust"]),
    .executableTarget(
      name: "pinproxy",
      dependencies: [
        "PinProxy", "PinConfig", "PinTLS", "PinTrust", "PinHTTP", "PinAppFormats", "PinEventLoop",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]
    ),
    // Fixture loading and policy helpers shared by the test targets (never shipped).
    .target(
      name: "PinTestSupport", dependencies: ["PinTLS", "PinTrust", "PinHTTP2"], path: "Tests/PinTestSupport"),
  ] + unitTests + endToEndTests + fuzzTargets + benchmarkTargets,
  swiftLanguageModes: [.v6]
)

/// The unit suites. scripts/test.sh runs them in its sanitizer builds, where
/// AddressSanitizer's run counts each test, and sets PINPROXY_END_TO_END_ONLY
/// for its plain debug build, which then compiles and runs the end-to-end
/// suite only: the same tests run twice more under the sanitizers, and on
/// two cores the CPU a third run took was what the test run could not spare.
/// `swift test` without the variable builds and runs every suite.
var unitTests: [Target] {
  guard Context.environment["PINPROXY_END_TO_END_ONLY"] == nil else { return [] }
  return [
    .testTarget(name: "PinTrustTests", dependencies: ["PinTrust"]),
    .testTarget(name: "PinHTTPTests", dependencies: ["PinHTTP"]),
    .testTarget(name: "PinHTTP2Tests", dependencies: ["PinHTTP2", "PinTestSupport"]),
    .testTarget(name: "PinEventLoopTests", dependencies: ["PinEventLoop"]),
    .testTarget(name: "PinConfigTests", dependencies: ["PinConfig"]),
    .testTarget(name: "PinTLSTests", dependencies: ["PinTLS", "PinTrust", "PinTestSupport"]),
    .testTarget(
      name: "AFSecurityPolicyTests",
      dependencies: ["PinTLS", "PinTrust", "PinConfig", "PinProxy", "PinTestSupport"]),
    .testTarget(
      name: "PinProxyTests",
      dependencies: ["PinConfig", "PinHTTP", "PinHTTP2", "PinProxy", "PinTLS", "PinTrust", "PinTestSupport"]),
  ]
}

/// The tests that drive the real binary. The sanitizer builds
/// (scripts/sanitizers.sh) run only the unit suites and set
/// PINPROXY_UNIT_TESTS_ONLY, so they do not compile these.
var endToEndTests: [Target] {
  guard Context.environment["PINPROXY_UNIT_TESTS_ONLY"] == nil else { return [] }
  return [.testTarget(name: "EndToEndTests", dependencies: ["PinTLS", "PinTrust", "PinTestSupport"])]
}

/// The libFuzzer targets over the parsers (Fuzz/Sources, corpora in
/// Fuzz/Corpus), only when PINPROXY_FUZZ_TARGETS is set: Fuzz/build.sh sets
/// it and builds everything with AddressSanitizer and libFuzzer's coverage,
/// so the test run's ASan build (scripts/sanitizers.sh) is also the fuzzers'
/// build. Each executable defines `LLVMFuzzerTestOneInput` and `<Target>_main`
/// (no top-level code, hence -parse-as-library) and links libFuzzer.
var fuzzTargets: [Target] {
  guard Context.environment["PINPROXY_FUZZ_TARGETS"] != nil else { return [] }
  func fuzzer(_ name: String, _ dependencies: [Target.Dependency]) -> Target {
    .executableTarget(
      name: name, dependencies: ["FuzzSupport"] + dependencies, path: "Fuzz/Sources/\(name)",
      swiftSettings: [.unsafeFlags(["-parse-as-library"])],
      linkerSettings: [.unsafeFlags(["-sanitize=fuzzer"])])
  }
  return [
    .target(name: "FuzzSupport", dependencies: ["PinHTTP"], path: "Fuzz/Sources/FuzzSupport"),
    .target(
      name: "FuzzHTTP2Support", dependencies: ["FuzzSupport", "PinHTTP2"],
      path: "Fuzz/Sources/FuzzHTTP2Support"),
    fuzzer("FuzzRequestParser", ["PinHTTP"]),
    fuzzer("FuzzResponseParser", ["PinHTTP"]),
    fuzzer("FuzzForwardedHead", ["PinHTTP"]),
    fuzzer("FuzzConfig", ["PinConfig"]),
    fuzzer("FuzzImport", ["PinAppFormats", "PinConfig"]),
    fuzzer("FuzzCertificate", ["PinTLS", "PinTrust"]),
    fuzzer("FuzzRevocation", ["PinTLS", "PinTrust"]),
    fuzzer("FuzzProxyAuth", ["PinProxy"]),
    fuzzer("FuzzHTTP2Server", ["FuzzHTTP2Support", "PinHTTP2"]),
    fuzzer("FuzzHTTP2Client", ["FuzzHTTP2Support", "PinHTTP2"]),
    fuzzer("FuzzSOCKS", ["PinProxy"]),
    fuzzer("FuzzPAC", ["PinProxy"]),
    fuzzer("FuzzClientHello", ["PinProxy"]),
    fuzzer("FuzzSockDiag", ["PinEventLoop"]),
  ]
}

/// The benchmarks (Benchmarks/): ordo-one's package-benchmark targets over the
/// trust and TLS modules and `pinproxy-load`, an HTTP/1.1 load generator, only
/// when PINPROXY_BENCHMARKS is set (building and testing pinproxy never
/// resolves or builds the harness). In the root package so that
/// Benchmarks/smoke.sh builds them into the test run's own debug build,
/// compiling pinproxy's modules no second time.
/// Run: PINPROXY_BENCHMARKS=1 swift package --disable-sandbox benchmark
var wantsBenchmarks: Bool {
  Context.environment["PINPROXY_BENCHMARKS"] != nil && Context.environment["PINPROXY_UNIT_TESTS_ONLY"] == nil
}

var benchmarkDependencies: [Package.Dependency] {
  guard wantsBenchmarks else { return [] }
  return [
    .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
  ]
}

var benchmarkTargets: [Target] {
  guard wantsBenchmarks else { return [] }
  /// A package-benchmark target in Benchmarks/Benchmarks/NAME using the trust and TLS modules.
  func benchmark(_ name: String) -> Target {
    .executableTarget(
      name: name,
      dependencies: [.product(name: "Benchmark", package: "benchmark"), "PinTrust", "PinTLS"],
      path: "Benchmarks/Benchmarks/\(name)",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    )
  }
  return [
    .systemLibrary(name: "CEpoll", path: "Benchmarks/Sources/CEpoll"),
    .executableTarget(
      name: "pinproxy-load",
      dependencies: [
        .product(name: "Histogram", package: "hdrhistogram-swift"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"), "PinHTTP", "CEpoll",
      ],
      path: "Benchmarks/Sources/pinproxy-load"
    ),
    benchmark("TrustEvaluation"),
    benchmark("Interception"),
  ]
}

/// Debug builds compile each module of ours whole (`-wmo`, its code
/// generated on two threads, one object per file as the index store
/// expects): batch mode type-checks a module's declarations once per batch,
/// and scripts/test.sh makes four debug builds of every module (the tests',
/// AddressSanitizer's, ThreadSanitizer's, the benchmarks'). Measured on the
/// two-core CI machine: a clean `swift build --build-tests` took 192 CPU-s
/// in batch mode and 136 CPU-s whole. An edit recompiles its whole module,
/// so an edit-compile loop may set PINPROXY_INCREMENTAL=1 for batch mode, in
/// a build directory of its own (`--scratch-path`): objects of the two modes
/// mixed in one directory fail to link.
if Context.environment["PINPROXY_INCREMENTAL"] == nil {
  for target in package.targets where target.type != .system && target.type != .binary {
    target.swiftSettings =
      (target.swiftSettings ?? []) + [
        .unsafeFlags(["-wmo", "-num-threads", "2"], .when(configuration: .debug))
      ]
  }
}
