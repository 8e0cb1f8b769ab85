import FuzzSupport
@_spi(Fuzzing) import PinProxy

/// `Proxy-Authorization` values from many client keys through the real
/// credential decoder, authenticator and throttle, one state across inputs
/// (so the throttle's table fills and evicts). Properties: a field that is
/// no Basic credential is refused 407 and costs nothing; only a client in
/// debt is ever throttled; nothing is allowed without the right password;
/// a verified credential is served whatever its bucket holds; the table
/// stays within its bound.
nonisolated(unsafe) let harness = ProxyAuthFuzzing()

func fuzzProxyAuth(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  if let failure = harness.run(inputBytes(data, size)) { requireFailure(failure) }
  return 0
}

@_cdecl("FuzzProxyAuth_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzProxyAuth(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzProxyAuth(data, size) }
