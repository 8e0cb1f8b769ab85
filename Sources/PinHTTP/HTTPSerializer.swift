/// Writes HTTP/1.1 message heads (each in one buffer, field values as the
/// bytes they arrived as) and chunked framing.
public enum HTTPSerializer {
  public static func requestHead(method: String, target: String, headers: HTTPHeaders) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(64 + fieldsSize(headers))
    appendRequestLine(method: method, target: target, to: &bytes)
    appendFields(headers, to: &bytes)
    bytes += [0x0d, 0x0a]
    return bytes
  }

  public static func responseHead(_ head: HTTPResponseHead) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(64 + fieldsSize(head.headers))
    appendStatusLine(status: head.status, reason: head.reason, to: &bytes)
    appendFields(head.headers, to: &bytes)
    bytes += [0x0d, 0x0a]
    return bytes
  }

  /// `METHOD TARGET HTTP/1.1` and its CRLF.
  static func appendRequestLine(method: String, target: String, to bytes: inout [UInt8]) {
    bytes += method.utf8
    bytes.append(0x20)
    bytes += target.utf8
    appendStatic(" HTTP/1.1\r\n", to: &bytes)
  }

  /// `HTTP/1.1 STATUS REASON` and its CRLF.
  static func appendStatusLine(status: Int, reason: String, to bytes: inout [UInt8]) {
    appendStatic("HTTP/1.1 ", to: &bytes)
    appendDecimal(status, to: &bytes)
    bytes.append(0x20)
    bytes += reason.utf8
    appendStatic("\r\n", to: &bytes)
  }

  /// A literal's bytes, copied from where the compiler put them.
  @inline(__always)
  static func appendStatic(_ text: StaticString, to bytes: inout [UInt8]) {
    bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
  }

  /// A number's decimal digits (`ByteWriter.putDecimal`: no String made).
  static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
    bytes.appendWriting(room: 20) { $0.putDecimal(value) }
  }

  /// `name: value` and its CRLF.
  static func appendField<Name: Collection<UInt8>, Value: Collection<UInt8>>(
    name: Name, value: Value, to bytes: inout [UInt8]
  ) {
    bytes += name
    appendStatic(": ", to: &bytes)
    bytes += value
    appendStatic("\r\n", to: &bytes)
  }

  static func fieldsSize(_ headers: HTTPHeaders) -> Int {
    headers.byteCount + 4 * headers.count
  }

  static func appendFields(_ headers: HTTPHeaders, to bytes: inout [UInt8]) {
    for field in headers { appendField(name: field.nameBytes, value: field.valueSlice, to: &bytes) }
  }

  /// One chunk; empty input writes nothing (an empty chunk would end the body).
  /// Built in one allocation of its final size: the body is copied once, not
  /// once per concatenation.
  public static func chunk(_ bytes: [UInt8]) -> [UInt8] {
    var framed: [UInt8] = []
    framed.reserveCapacity(bytes.count + 20)
    bytes.withUnsafeBytes { appendChunk($0, to: &framed) }
    return framed
  }

  /// Appends one chunk (nothing for no bytes), growing `output` at most
  /// once, and geometrically: called again and again on one buffer, an
  /// exact `reserveCapacity` would copy it every time.
  public static func appendChunk(_ bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) {
    guard !bytes.isEmpty else { return }
    let needed = output.count + bytes.count + 20
    if output.capacity < needed { output.reserveCapacity(max(needed, output.capacity * 2)) }
    output += String(bytes.count, radix: 16).utf8
    output += [0x0d, 0x0a]
    output += bytes
    output += [0x0d, 0x0a]
  }

  public static func lastChunk(trailers: HTTPHeaders = HTTPHeaders()) -> [UInt8] {
    var bytes: [UInt8] = []
    appendLastChunk(trailers: trailers, to: &bytes)
    return bytes
  }

  /// The last chunk, the trailer section and the blank line that ends the body.
  public static func appendLastChunk(trailers: HTTPHeaders, to bytes: inout [UInt8]) {
    bytes += [0x30, 0x0d, 0x0a]
    appendFields(trailers, to: &bytes)
    bytes += [0x0d, 0x0a]
  }
}
