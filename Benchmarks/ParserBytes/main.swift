// Built by Benchmarks/parser-bytes.sh together with Sources/PinHTTP (one module).
import Foundation
// Feeds a request head one byte per feed() call and reports ns per byte.
let size = Int(CommandLine.arguments[1]) ?? 60000
let pad = String(repeating: "p", count: size - 60)
let head = Array("GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\nX-Pad: \(pad)\r\n\r\n".utf8)
var best = Double.infinity
for _ in 0..<3 {
  var parser = HTTP1Parser(role: .request, limits: HTTPLimits(maxHeaderBytes: 1 << 20))
  let start = DispatchTime.now().uptimeNanoseconds
  var events = 0
  for byte in head { events += try! parser.feed([byte]).count }
  let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start)
  precondition(events == 2)
  best = min(best, elapsed / Double(head.count))
}
print(String(format: "%d-byte head, a byte per feed: %.1f ns per byte (best of 3)", head.count, best))
