import FuzzSupport
import PinHTTP

/// Response bytes for a request whose method the first input byte picks,
/// fed whole and byte by byte. Properties: no crash; the same outcome.
func fuzzResponseParser(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard let first = bytes.first else { return 0 }
  let method = ["GET", "HEAD", "POST", "CONNECT"][Int(first) % 4]
  let input = Array(bytes.dropFirst())
  let whole = parse([input], method: method)
  let pieces = input.count <= 512 ? input.map { [$0] } : [input]
  require(whole == parse(pieces, method: method), "a byte-at-a-time feed parsed differently")
  return 0
}

enum Outcome: Equatable {
  case events([HTTP1Parser.Event])
  case failed(HTTPParseError.Kind)
}

func parse(_ pieces: [[UInt8]], method: String) -> Outcome {
  var parser = HTTP1Parser(
    role: .response, limits: HTTPLimits(maxHeaderBytes: 4096, maxHeaderCount: 32), pausesBetweenMessages: true
  )
  parser.expectResponse(to: method)
  var events: [HTTP1Parser.Event] = []
  do {
    for piece in pieces { events += try parser.feed(piece) }
    if !parser.isPaused { events += try parser.finish() }
  } catch {
    return .failed(error.kind)
  }
  return .events(mergedBodies(events))
}

@_cdecl("FuzzResponseParser_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzResponseParser(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzResponseParser(data, size) }
