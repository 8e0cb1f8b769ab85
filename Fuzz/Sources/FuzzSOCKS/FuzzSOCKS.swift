import FuzzSupport
@_spi(Fuzzing) import PinProxy

/// A SOCKS5 client's handshake bytes through `SocksHandshake`, fed split
/// and whole (see `SocksFuzzing`): the same steps either way, replies well
/// formed, nothing buffered past the bound, a CONNECT only once the
/// handshake allows it and only to a valid host and port.
func fuzzSOCKS(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  if let failure = SocksFuzzing.run(inputBytes(data, size)) { requireFailure(failure) }
  return 0
}

@_cdecl("FuzzSOCKS_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzSOCKS(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzSOCKS(data, size) }
