import FuzzSupport
import PinHTTP

/// Request bytes, cut in two at a position the first input byte chooses and
/// fed to a parser that pauses between messages, as the proxy's sessions
/// use it. Properties: no crash; the same events as one whole feed.
func fuzzRequestParser(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard let first = bytes.first else { return 0 }
  let input = Array(bytes.dropFirst())
  let cut = input.isEmpty ? 0 : Int(first) % (input.count + 1)
  let limits = HTTPLimits(maxHeaderBytes: 4096, maxHeaderCount: 32, maxURILength: 1024)
  let whole = FuzzDriver.parse([input], limits: limits)
  let split = FuzzDriver.parse([Array(input[..<cut]), Array(input[cut...])], limits: limits)
  require(whole == split, "a split feed parsed differently")
  return 0
}

enum FuzzDriver {
  enum Outcome: Equatable {
    case events([HTTP1Parser.Event])
    case failed(HTTPParseError.Kind)
  }

  /// Feeds the pieces, resuming after each message, then ends the input.
  static func parse(_ pieces: [[UInt8]], limits: HTTPLimits) -> Outcome {
    var parser = HTTP1Parser(role: .request, limits: limits, pausesBetweenMessages: true)
    var events: [HTTP1Parser.Event] = []
    do {
      for piece in pieces {
        events += try parser.feed(piece)
        while parser.isPaused {
          let more = try parser.resume()
          if more.isEmpty { break }
          events += more
        }
      }
      events += try parser.finish()
      while parser.isPaused {
        let more = try parser.resume()
        if more.isEmpty { break }
        events += more
      }
    } catch {
      return .failed(error.kind)
    }
    return .events(mergedBodies(events))
  }
}

@_cdecl("FuzzRequestParser_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzRequestParser(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzRequestParser(data, size) }
