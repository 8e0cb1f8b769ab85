import FuzzSupport
@_spi(Fuzzing) import PinProxy

/// The PAC writer's escaping: configuration text of any kind (names, hosts, the proxy address) never leaves its string literal (see `PACFuzzing`).
func fuzzPAC(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  if let failure = PACFuzzing.run(inputBytes(data, size)) { requireFailure(failure) }
  return 0
}

@_cdecl("FuzzPAC_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzPAC(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzPAC(data, size) }
