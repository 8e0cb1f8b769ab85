import FuzzHTTP2Support
import FuzzSupport
import PinHTTP2

/// Bytes from an HTTP/2 client, after a valid connection preface, into a
/// server session (100 streams, 64 KiB header lists, 100 fields). The first
/// three input bytes pick where the rest is cut into up to four `receive`s;
/// after each, the session's output is taken (with the events that sending
/// raised) and every request is answered with a small body, every DATA
/// consumed. Properties: no crash, no sanitizer report; no delivered header
/// block over the field count or the list size (RFC 9113 §6.5.2: name +
/// value + 32 per field); the buffered body count never negative.
let clientPreface: [UInt8] =
  Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 0x04, 0x00, 0, 0, 0, 0]
let responseBody = [UInt8](repeating: 0x62, count: 1000)

func fuzzHTTP2Server(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard bytes.count >= 3 else { return 0 }
  let payload = Array(bytes.dropFirst(3))
  let limits = HTTP2Fuzz.limits
  guard
    let session = try? HTTP2Session(
      role: .server, maxConcurrentStreams: 100, maxHeaderListSize: UInt32(HTTP2Fuzz.maxListSize),
      limits: limits)
  else { requireFailure("a server session could not be made") }
  var answered: Set<Int32> = []

  func handle(_ events: [HTTP2Event]) {
    for event in events {
      switch event {
      case .headers(let stream, let fields):
        HTTP2Fuzz.checkHeaderBlock(fields, stream: stream)
        if stream > 0, stream % 2 == 1, answered.insert(stream).inserted {
          try? session.submitResponse(
            stream: stream, [HTTP2Header(":status", "200"), HTTP2Header("content-type", "text/plain")],
            body: responseBody)
        }
      case .data(let stream, let body):
        session.consume(stream: stream, body.count)
      default:
        break
      }
    }
    require(
      session.bufferedBodyBytesTotal >= 0, "negative buffered body count \(session.bufferedBodyBytesTotal)")
  }

  for chunk in [clientPreface] + HTTP2Fuzz.chunks(of: payload, at: bytes[0..<3]) {
    do {
      handle(try session.receive(chunk))
    } catch {
      break
    }
    guard (try? session.pendingOutput()) != nil else { break }
    handle(session.takeEvents())
  }
  return 0
}

@_cdecl("FuzzHTTP2Server_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzHTTP2Server(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzHTTP2Server(data, size) }
