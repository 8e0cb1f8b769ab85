/// Writes HTTP/1.1 message heads (each in one buffer, field values as the
/// bytes they arrived as) and chunked framing.
public enum HTTPSerializer {
  public static func requestHead(method: String, target: String, headers: HTTPHeaders) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(64 + fieldsSize(headers))
    bytes += method.utf8
    bytes.append(0x20)
    bytes += target.utf8
    bytes += " HTTP/1.1\r\n".utf8
    appendFields(headers, to: &bytes)
    bytes += [0x0d, 0x0a]
    return bytes
  }

  public static func responseHead(_ head: HTTPResponseHead) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(64 + fieldsSize(head.headers))
    bytes += "HTTP/1.1 \(head.status) ".utf8
    bytes += head.reason.utf8
    bytes += [0x0d, 0x0a]
    appendFields(head.headers, to: &bytes)
    bytes += [0x0d, 0x0a]
    return bytes
  }

  static func fieldsSize(_ headers: HTTPHeaders) -> Int {
    headers.fields.reduce(0) { $0 + $1.nameBytes.count + $1.valueBytes.count + 4 }
  }

  static func appendFields(_ headers: HTTPHeaders, to bytes: inout [UInt8]) {
    for field in headers {
      bytes += field.nameBytes
      bytes += [0x3a, 0x20]
      bytes += field.valueBytes
      bytes += [0x0d, 0x0a]
    }
  }

  /// One chunk; empty input writes nothing (an empty chunk would end the body).
  /// Built in one allocation of its final size: the body is copied once, not
  /// once per concatenation.
  public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
    guard !bytes.isEmpty else { return [] }
    let size = String(bytes.count, radix: 16).utf8
    var framed: [UInt8] = []
    framed.reserveCapacity(size.count + bytes.count + 4)
    framed += size
    framed += [0x0d, 0x0a]
    framed += bytes
    framed += [0x0d, 0x0a]
    return framed
  }

  public static func lastChunk(trailers: HTTPHeaders = HTTPHeaders()) -> [UInt8] {
    var bytes: [UInt8] = [0x30, 0x0d, 0x0a]
    appendFields(trailers, to: &bytes)
    bytes += [0x0d, 0x0a]
    return bytes
  }
}
