/// A property list value whose dictionaries keep the order they were built
/// in, so an export reads the same every time.
indirect enum PlistValue {
  case string(String)
  case bool(Bool)
  case array([PlistValue])
  case dictionary([(String, PlistValue)])
}

/// Writes XML property lists (Apple's 1.0 DTD). Every string is escaped, so
/// no text of a configuration can add an element.
enum PlistWriter {
  static func document(_ root: PlistValue) -> String {
    var out = """
      <?xml version="1.0" encoding="UTF-8"?>
      <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
      <plist version="1.0">

      """
    write(root, depth: 0, into: &out)
    return out + "</plist>\n"
  }

  private static func write(_ value: PlistValue, depth: Int, into out: inout String) {
    let indent = String(repeating: "\t", count: depth)
    switch value {
    case .string(let text): out += "\(indent)<string>\(escaped(text))</string>\n"
    case .bool(let flag): out += "\(indent)<\(flag ? "true" : "false")/>\n"
    case .array(let items):
      out += "\(indent)<array>\n"
      for item in items { write(item, depth: depth + 1, into: &out) }
      out += "\(indent)</array>\n"
    case .dictionary(let entries):
      out += "\(indent)<dict>\n"
      for (key, item) in entries {
        out += "\(indent)\t<key>\(escaped(key))</key>\n"
        write(item, depth: depth + 1, into: &out)
      }
      out += "\(indent)</dict>\n"
    }
  }

  /// XML character data: the markup characters as entities, and control
  /// characters (not allowed in XML 1.0) as `?`.
  static func escaped(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      default:
        if scalar.value < 0x20 && scalar != "\n" && scalar != "\t" {
          out += "?"
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out
  }
}
