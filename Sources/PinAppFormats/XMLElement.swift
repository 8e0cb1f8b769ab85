/// A small, strict XML reader for configuration files such as Android's
/// network_security_config.xml: elements, attributes, text, comments,
/// processing instructions, CDATA and the predefined and numeric entities.
/// A DOCTYPE is refused (no entity definitions, so no entity expansion),
/// and input size and nesting depth are bounded.
public struct XMLNode: Sendable, Equatable {
  public var name: String
  public var attributes: [String: String]
  public var children: [XMLNode]
  public var text: String
  public var line: Int

  public func children(named name: String) -> [XMLNode] { children.filter { $0.name == name } }
  public func child(named name: String) -> XMLNode? { children.first { $0.name == name } }
}

public enum XMLReader {
  public static let maximumBytes = 1 << 20
  public static let maximumDepth = 64

  public static func parse(_ bytes: [UInt8]) throws(ImportError) -> XMLNode {
    guard bytes.count <= maximumBytes else { throw ImportError("the XML file is over 1 MiB") }
    // A UTF-8 byte-order mark is allowed before the document.
    let body = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(bytes.dropFirst(3)) : bytes
    var reader = Cursor(bytes: body)
    var root: XMLNode?
    var stack: [XMLNode] = []
    while !reader.atEnd {
      if reader.consume("<?") {
        try reader.skip(past: "?>")
      } else if reader.consume("<!--") {
        try reader.skip(past: "-->")
      } else if reader.consume("<![CDATA[") {
        let text = try reader.take(until: "]]>")
        if !stack.isEmpty { stack[stack.count - 1].text += text }
      } else if reader.peek("<!") {
        throw reader.error("DOCTYPE and other declarations are not accepted")
      } else if reader.consume("</") {
        let name = reader.name()
        reader.skipSpace()
        guard reader.consume(">") else { throw reader.error("malformed end tag </\(name)") }
        guard let open = stack.popLast(), open.name == name else {
          throw reader.error("end tag </\(name)> does not close the open element")
        }
        if stack.isEmpty { root = open } else { stack[stack.count - 1].children.append(open) }
      } else if reader.consume("<") {
        guard root == nil else { throw reader.error("content after the root element") }
        let line = reader.line
        let name = reader.name()
        guard !name.isEmpty else { throw reader.error("an element without a name") }
        var element = XMLNode(name: name, attributes: [:], children: [], text: "", line: line)
        while true {
          reader.skipSpace()
          if reader.consume("/>") {
            if stack.isEmpty { root = element } else { stack[stack.count - 1].children.append(element) }
            break
          }
          if reader.consume(">") {
            guard stack.count < maximumDepth else {
              throw reader.error("elements nested over \(maximumDepth) deep")
            }
            stack.append(element)
            break
          }
          let attribute = reader.name()
          reader.skipSpace()
          guard !attribute.isEmpty, reader.consume("=") else {
            throw reader.error("malformed attribute in <\(name)>")
          }
          reader.skipSpace()
          guard let quote = reader.next(), quote == UInt8(ascii: "\"") || quote == UInt8(ascii: "'") else {
            throw reader.error("attribute \(attribute) is not quoted")
          }
          let raw = try reader.take(until: quote == UInt8(ascii: "\"") ? "\"" : "'")
          guard element.attributes[attribute] == nil else {
            throw reader.error("attribute \(attribute) twice")
          }
          element.attributes[attribute] = try decode(raw, reader)
        }
      } else {
        let raw = reader.takeText()
        let text = try decode(raw, reader)
        if stack.isEmpty {
          guard text.allSatisfy(\.isWhitespace) else { throw reader.error("text outside the root element") }
        } else {
          stack[stack.count - 1].text += text
        }
      }
    }
    guard stack.isEmpty, let root else { throw ImportError("the XML document is incomplete") }
    return root
  }

  static func decode(_ raw: String, _ reader: Cursor) throws(ImportError) -> String {
    guard raw.contains("&") else { return raw }
    var out = ""
    var rest = Substring(raw)
    while let amp = rest.firstIndex(of: "&") {
      out += rest[..<amp]
      guard let semicolon = rest[amp...].firstIndex(of: ";") else {
        throw reader.error("an unterminated entity")
      }
      let entity = rest[rest.index(after: amp)..<semicolon]
      switch entity {
      case "amp": out += "&"
      case "lt": out += "<"
      case "gt": out += ">"
      case "quot": out += "\""
      case "apos": out += "'"
      default:
        let value: UInt32?
        if entity.hasPrefix("#x") {
          value = UInt32(entity.dropFirst(2), radix: 16)
        } else if entity.hasPrefix("#") {
          value = UInt32(entity.dropFirst(), radix: 10)
        } else {
          value = nil
        }
        guard let value, let scalar = Unicode.Scalar(value) else {
          throw reader.error("unknown entity &\(entity);")
        }
        out.unicodeScalars.append(scalar)
      }
      rest = rest[rest.index(after: semicolon)...]
    }
    return out + rest
  }

  struct Cursor {
    let bytes: [UInt8]
    var index = 0
    var line = 1

    var atEnd: Bool { index >= bytes.count }

    func peek(_ text: String) -> Bool {
      let pattern = Array(text.utf8)
      return index + pattern.count <= bytes.count && Array(bytes[index..<index + pattern.count]) == pattern
    }

    mutating func consume(_ text: String) -> Bool {
      guard peek(text) else { return false }
      advance(text.utf8.count)
      return true
    }

    mutating func advance(_ count: Int) {
      for byte in bytes[index..<min(bytes.count, index + count)] where byte == 0x0a { line += 1 }
      index = min(bytes.count, index + count)
    }

    mutating func next() -> UInt8? {
      guard !atEnd else { return nil }
      let byte = bytes[index]
      advance(1)
      return byte
    }

    mutating func skip(past text: String) throws(ImportError) { _ = try take(until: text) }

    mutating func take(until text: String) throws(ImportError) -> String {
      let start = index
      while !atEnd && !peek(text) { advance(1) }
      guard !atEnd else { throw error("missing \(text)") }
      let taken = String(decoding: bytes[start..<index], as: UTF8.self)
      advance(text.utf8.count)
      return taken
    }

    mutating func takeText() -> String {
      let start = index
      while !atEnd && bytes[index] != UInt8(ascii: "<") { advance(1) }
      return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func name() -> String {
      let start = index
      while !atEnd {
        let byte = bytes[index]
        let isName =
          (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x30 && byte <= 0x39)
          || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ":")
          || byte == UInt8(ascii: ".")
        guard isName else { break }
        advance(1)
      }
      return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func skipSpace() {
      while !atEnd, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { advance(1) }
    }

    func error(_ message: String) -> ImportError { ImportError("line \(line): \(message)") }
  }
}
