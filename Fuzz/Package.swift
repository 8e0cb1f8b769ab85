// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets over pinproxy's parsers. Built only with the fuzzer
// sanitizer (Fuzz/run.sh): each executable defines LLVMFuzzerTestOneInput
// and libFuzzer supplies main.
let package = Package(
  name: "pinproxy-fuzz",
  dependencies: [.package(name: "pinproxy", path: "..")],
  targets: [
    .target(name: "FuzzSupport", dependencies: [.product(name: "PinHTTP", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzRequestParser",
      dependencies: ["FuzzSupport", .product(name: "PinHTTP", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzResponseParser",
      dependencies: ["FuzzSupport", .product(name: "PinHTTP", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzForwardedHead",
      dependencies: ["FuzzSupport", .product(name: "PinHTTP", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzConfig", dependencies: ["FuzzSupport", .product(name: "PinConfig", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzImport",
      dependencies: [
        "FuzzSupport", .product(name: "PinAppFormats", package: "pinproxy"),
        .product(name: "PinConfig", package: "pinproxy"),
      ]),
    .executableTarget(
      name: "FuzzCertificate",
      dependencies: [
        "FuzzSupport", .product(name: "PinTLS", package: "pinproxy"),
        .product(name: "PinTrust", package: "pinproxy"),
      ]),
    .executableTarget(
      name: "FuzzRevocation",
      dependencies: [
        "FuzzSupport", .product(name: "PinTLS", package: "pinproxy"),
        .product(name: "PinTrust", package: "pinproxy"),
      ]),
    .executableTarget(
      name: "FuzzProxyAuth",
      dependencies: ["FuzzSupport", .product(name: "PinProxy", package: "pinproxy")]),
    .target(
      name: "FuzzHTTP2Support",
      dependencies: ["FuzzSupport", .product(name: "PinHTTP2", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzHTTP2Server",
      dependencies: ["FuzzSupport", "FuzzHTTP2Support", .product(name: "PinHTTP2", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzSOCKS", dependencies: ["FuzzSupport", .product(name: "PinProxy", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzPAC", dependencies: ["FuzzSupport", .product(name: "PinProxy", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzClientHello", dependencies: ["FuzzSupport", .product(name: "PinProxy", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzSockDiag",
      dependencies: ["FuzzSupport", .product(name: "PinEventLoop", package: "pinproxy")]),
    .executableTarget(
      name: "FuzzHTTP2Client",
      dependencies: ["FuzzSupport", "FuzzHTTP2Support", .product(name: "PinHTTP2", package: "pinproxy")]),
  ],
  swiftLanguageModes: [.v6]
)
