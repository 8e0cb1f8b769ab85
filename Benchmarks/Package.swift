// swift-tools-version: 6.1
import PackageDescription

// A separate package so that building and testing pinproxy never builds the
// benchmark harness. Run: swift package --disable-sandbox benchmark
/// A package-benchmark target in Benchmarks/NAME using the trust and TLS modules.
func benchmark(_ name: String) -> Target {
  .executableTarget(
    name: name,
    dependencies: [
      .product(name: "Benchmark", package: "benchmark"),
      .product(name: "PinTrust", package: "pinproxy"),
      .product(name: "PinTLS", package: "pinproxy"),
    ],
    path: "Benchmarks/\(name)",
    plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
  )
}

let package = Package(
  name: "pinproxy-benchmarks",
  platforms: [.macOS(.v14)],
  dependencies: [
    .package(name: "pinproxy", path: ".."),
    .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
  ],
  targets: [
    .systemLibrary(name: "CEpoll", path: "Sources/CEpoll"),
    // The HTTP/1.1 load generator for Benchmarks/compare.
    .executableTarget(
      name: "pinproxy-load",
      dependencies: [
        .product(name: "Histogram", package: "hdrhistogram-swift"),
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "PinHTTP", package: "pinproxy"), "CEpoll",
      ],
      path: "Sources/pinproxy-load"
    ),
    benchmark("TrustEvaluation"),
    benchmark("Interception"),
  ],
  swiftLanguageModes: [.v6]
)
