import FuzzSupport
import PinConfig

/// Any text as a configuration file: parsing must end, quickly, in a
/// configuration or located errors — never a crash, never more errors
/// than the listing cap.
func fuzzConfig(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let text = String(decoding: inputBytes(data, size), as: UTF8.self)
  let (_, errors) = ConfigurationParser.parseCollecting(text, file: "fuzz.yaml")
  require(errors.count <= ConfigErrors.listed + 1, "\(errors.count) errors listed")
  for error in errors { require(error.file == "fuzz.yaml") }
  return 0
}

@_cdecl("FuzzConfig_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzConfig(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzConfig(data, size) }
