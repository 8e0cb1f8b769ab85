import FuzzSupport
@_spi(Fuzzing) import PinProxy

/// The first bytes of a spliced tunnel through `ClientHelloName`: the same verdict however the bytes are split, nothing kept past the bound, only valid host names (see `ClientHelloFuzzing`).
func fuzzClientHello(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  if let failure = ClientHelloFuzzing.run(inputBytes(data, size)) { requireFailure(failure) }
  return 0
}

@_cdecl("FuzzClientHello_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzClientHello(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzClientHello(data, size) }
