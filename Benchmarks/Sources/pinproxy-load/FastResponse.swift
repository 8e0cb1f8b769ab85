/// The common case scanned in place: a response head with Content-Length and
/// no Transfer-Encoding. Anything else is handed to the strict parser.
struct FastResponse {
  enum Outcome {
    /// More bytes needed.
    case partial
    /// The whole response: status, body length, whether the connection stays open.
    case complete(status: Int, bodyBytes: Int, keepAlive: Bool)
    /// Not a shape this scanner handles; use the full parser on all bytes so far.
    case unsupported([UInt8])
  }

  private var head: [UInt8] = []
  private var bodyRemaining = -1
  private var status = 0
  private var bodyLength = 0
  private var keepAlive = true

  mutating func reset() {
    head.removeAll(keepingCapacity: true)
    bodyRemaining = -1
  }

  mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    var offset = 0
    if bodyRemaining < 0 {
      let start = max(0, head.count - 3)
      head.append(contentsOf: bytes)
      guard let end = Self.headEnd(head, from: start) else {
        return head.count > 65536 ? .unsupported(head) : .partial
      }
      guard let parsed = Self.parseHead(head[..<end]) else { return .unsupported(head) }
      (status, bodyLength, keepAlive) = parsed
      let consumedFromThis = end + 4 - (head.count - bytes.count)
      offset = consumedFromThis
      bodyRemaining = bodyLength
    }
    let available = bytes.count - offset
    if available > bodyRemaining { return .unsupported(Array(bytes)) }  // pipelined extra bytes: not expected
    bodyRemaining -= available
    return bodyRemaining == 0
      ? .complete(status: status, bodyBytes: bodyLength, keepAlive: keepAlive) : .partial
  }

  static func headEnd(_ bytes: [UInt8], from start: Int) -> Int? {
    var index = start
    while index + 3 < bytes.count {
      if bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
        return index
      }
      index += 1
    }
    return nil
  }

  /// Status, Content-Length and keep-alive from an HTTP/1.1 head; nil for other shapes.
  static func parseHead(_ head: ArraySlice<UInt8>) -> (Int, Int, Bool)? {
    let prefix = Array("HTTP/1.1 ".utf8)
    guard head.count > 12, head.prefix(9).elementsEqual(prefix) else { return nil }
    let digits = head.dropFirst(9).prefix(3)
    guard digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
    let status = digits.reduce(0) { $0 * 10 + Int($1 - 48) }
    guard status >= 200 else { return nil }
    var length: Int?
    var keepAlive = true
    var lineStart = head.startIndex
    while let newline = head[lineStart...].firstIndex(of: 10) {
      let line = head[lineStart..<newline]
      lineStart = newline + 1
      if hasPrefix(line, "content-length:") {
        var value = 0
        var sawDigit = false
        for byte in line.dropFirst(15) where byte >= 48 && byte <= 57 {
          value = value * 10 + Int(byte - 48)
          sawDigit = true
        }
        if sawDigit { length = value }
      } else if hasPrefix(line, "transfer-encoding:") {
        return nil
      } else if hasPrefix(line, "connection:") && contains(line, "close") {
        keepAlive = false
      }
    }
    if lineStart < head.endIndex {
      let line = head[lineStart...]
      if hasPrefix(line, "content-length:") {
        length = line.dropFirst(15).filter { $0 >= 48 && $0 <= 57 }.reduce(0) { $0 * 10 + Int($1 - 48) }
      } else if hasPrefix(line, "transfer-encoding:") {
        return nil
      } else if hasPrefix(line, "connection:") && contains(line, "close") {
        keepAlive = false
      }
    }
    guard let length else { return nil }
    return (status, length, keepAlive)
  }
}

/// ASCII case-insensitive prefix test on raw bytes (`name` lower-case).
func hasPrefix(_ line: ArraySlice<UInt8>, _ name: StaticString) -> Bool {
  let count = name.utf8CodeUnitCount
  guard line.count >= count else { return false }
  return name.withUTF8Buffer { expected in
    var index = line.startIndex
    for byte in expected {
      let actual = line[index]
      if actual | 0x20 != byte && actual != byte { return false }
      index += 1
    }
    return true
  }
}

func contains(_ line: ArraySlice<UInt8>, _ word: StaticString) -> Bool {
  word.withUTF8Buffer { expected in
    let lowered = line.map { $0 | 0x20 }
    return lowered.count >= expected.count
      && (0...(lowered.count - expected.count)).contains { start in
        lowered[start..<start + expected.count].elementsEqual(expected)
      }
  }
}

extension String {
  func trimmedOfSpace() -> String {
    let set = " \r\t"
    var slice = Substring(self)
    while let first = slice.first, set.contains(first) { slice = slice.dropFirst() }
    while let last = slice.last, set.contains(last) { slice = slice.dropLast() }
    return String(slice)
  }
}
