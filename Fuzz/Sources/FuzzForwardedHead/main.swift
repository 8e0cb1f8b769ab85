import FuzzSupport
import PinHTTP

/// The property behind the smuggling fix: whatever request the parser
/// accepts, the forwarded message (head from `ForwardedHead`, body re-framed
/// from the parser's decision) is parsed by the next hop as exactly one
/// request, with the same framing, method and body — and the same holds for
/// a response sent on to a client.
func fuzzForwardedHead(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard let first = bytes.first else { return 0 }
  let input = Array(bytes.dropFirst())
  if first & 1 == 0 { checkRequest(input) } else { checkResponse(input, headRequest: first & 2 == 2) }
  return 0
}

/// The next hop's limits are its own: the proxy adds a few fields (Host,
/// Via, the framing field, Connection), so a head at our limit may pass it.
let nextHop = HTTPLimits(maxHeaderBytes: 64 * 1024 + 4096, maxHeaderCount: 100 + 8)

func message(_ events: [HTTP1Parser.Event]) -> (
  head: HTTP1Parser.Event, body: [UInt8], trailers: HTTPHeaders
)? {
  guard let head = events.first, case .end(let trailers)? = events.last else { return nil }
  var body: [UInt8] = []
  for case .body(let piece) in events { body += piece }
  return (head, body, trailers)
}

func checkRequest(_ input: [UInt8]) {
  var parser = HTTP1Parser(role: .request, pausesBetweenMessages: true)
  guard let events = try? parser.feed(input), let (headEvent, body, trailers) = message(events),
    case .request(let head) = headEvent, head.method != "CONNECT"
  else { return }
  var wire = ForwardedHead.request(head, target: "/t", authority: "origin.test", via: "1.1 pinproxy")
  if head.framing == .chunked {
    wire += HTTPSerializer.chunk(body) + HTTPSerializer.lastChunk(trailers: ForwardedHead.trailers(trailers))
  } else {
    wire += body
  }
  var origin = HTTP1Parser(role: .request, limits: nextHop, pausesBetweenMessages: true)
  let seen: [HTTP1Parser.Event]
  do {
    seen = try origin.feed(wire)
  } catch {
    requireFailure("the forwarded request does not parse: \(error)")
  }
  guard let (originEvent, originBody, originTrailers) = message(seen),
    case .request(let originHead) = originEvent
  else { requireFailure("the origin did not see one whole request") }
  require(!origin.hasBufferedInput, "bytes after the forwarded request")
  require(originHead.method == head.method)
  require(originBody == body, "the body changed")
  require(originHead.headers.values("Host") == ["origin.test"])
  switch head.framing {
  case .none, .length(0): require(originHead.framing == .none || originHead.framing == .length(0))
  default: require(originHead.framing == head.framing, "the framing changed")
  }
  for name in ["Content-Length", "Transfer-Encoding", "Host"] {
    require(!originTrailers.contains(name), "\(name) passed in a trailer")
  }
}

func checkResponse(_ input: [UInt8], headRequest: Bool) {
  var parser = HTTP1Parser(role: .response, pausesBetweenMessages: true)
  parser.expectResponse(to: headRequest ? "HEAD" : "GET")
  guard var events = try? parser.feed(input) else { return }
  if !parser.isPaused, let more = try? parser.finish() { events += more }
  guard let (headEvent, body, _) = message(events), case .response(let head) = headEvent,
    !(100..<200).contains(head.status)
  else { return }
  let (bytes, framing) = ForwardedHead.response(head, clientVersion: .http11, closing: false, via: "v")
  var wire = bytes
  switch framing {
  case .chunked: wire += HTTPSerializer.chunk(body) + HTTPSerializer.lastChunk()
  case .length, .untilClose: wire += body
  case .none: break
  }
  var client = HTTP1Parser(role: .response, limits: nextHop, pausesBetweenMessages: true)
  client.expectResponse(to: headRequest ? "HEAD" : "GET")
  guard var seen = try? client.feed(wire) else {
    requireFailure("the forwarded response does not parse")
  }
  if framing == .untilClose, let more = try? client.finish() { seen += more }
  guard let (clientEvent, clientBody, _) = message(seen), case .response(let clientHead) = clientEvent else {
    requireFailure("the client did not see one whole response")
  }
  require(!client.hasBufferedInput, "bytes after the forwarded response")
  require(clientHead.status == head.status)
  require(headRequest ? clientBody.isEmpty : clientBody == body, "the body changed")
}

@_cdecl("FuzzForwardedHead_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzForwardedHead(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzForwardedHead(data, size) }
