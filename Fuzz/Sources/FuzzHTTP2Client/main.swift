import FuzzHTTP2Support
import FuzzSupport
import PinHTTP2

/// Bytes from an HTTP/2 server, after a valid SETTINGS frame, into a client
/// session (64 KiB header lists, 100 fields) that has sent two requests:
/// stream 1 a GET without body, stream 3 a POST whose body is streamed (one
/// piece before anything is received, the rest and trailers after the first
/// piece of input). The first three input bytes pick where the rest is cut into
/// up to four `receive`s; after each, the session's output is taken (with the
/// events that sending raised), every DATA consumed. Properties: no crash, no
/// sanitizer report; no delivered header block over the field count or the
/// list size (RFC 9113 §6.5.2: name + value + 32 per field); the buffered
/// body count never negative.
let serverSettings: [UInt8] = [0, 0, 0, 0x04, 0x00, 0, 0, 0, 0]

func fuzzHTTP2Client(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard bytes.count >= 3 else { return 0 }
  let payload = Array(bytes.dropFirst(3))
  let limits = HTTP2Fuzz.limits
  let session: HTTP2Session
  let post: Int32
  do {
    session = try HTTP2Session(
      role: .client, maxConcurrentStreams: 0, maxHeaderListSize: UInt32(HTTP2Fuzz.maxListSize), limits: limits
    )
    let get = try session.submitRequest(
      [
        HTTP2Header(":method", "GET"), HTTP2Header(":scheme", "https"), HTTP2Header(":path", "/"),
        HTTP2Header(":authority", "example.com"),
      ], body: nil)
    post = try session.submitRequest(
      [
        HTTP2Header(":method", "POST"), HTTP2Header(":scheme", "https"), HTTP2Header(":path", "/upload"),
        HTTP2Header(":authority", "example.com"), HTTP2Header("content-type", "application/octet-stream"),
      ], streaming: true)
    require(get == 1 && post == 3, "request streams \(get), \(post)")
    session.sendBody(stream: post, [UInt8](repeating: 0x61, count: 300))
    _ = try session.pendingOutput()
  } catch {
    requireFailure("the client session could not start: \(error)")
  }

  func handle(_ events: [HTTP2Event]) {
    for event in events {
      switch event {
      case .headers(let stream, let fields):
        HTTP2Fuzz.checkHeaderBlock(fields, stream: stream)
      case .data(let stream, let body):
        session.consume(stream: stream, body.count)
      default:
        break
      }
    }
    require(
      session.bufferedBodyBytesTotal >= 0, "negative buffered body count \(session.bufferedBodyBytesTotal)")
  }

  for (index, chunk) in ([serverSettings] + HTTP2Fuzz.chunks(of: payload, at: bytes[0..<3])).enumerated() {
    do {
      handle(try session.receive(chunk))
    } catch {
      break
    }
    if index == 1 {
      session.sendBody(stream: post, [UInt8](repeating: 0x62, count: 70_000))
      session.endBody(stream: post, trailers: [HTTP2Header("x-checksum", "0")])
    }
    guard (try? session.pendingOutput()) != nil else { break }
    handle(session.takeEvents())
  }
  return 0
}

@_cdecl("FuzzHTTP2Client_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzHTTP2Client(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzHTTP2Client(data, size) }
