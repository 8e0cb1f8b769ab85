/// The one escaping every client- or origin-controlled string goes through
/// before it reaches a log line or a response body.
///
/// A request can carry almost any byte: ESC and OSC sequences that rewrite a
/// terminal showing the log, CR that forges a new log line, NEL and U+2028
/// that some viewers and JSON consumers treat as line breaks, and bidi
/// overrides (RLO) that make a line read differently from what it holds.
/// Each becomes a visible `\u{XXXX}`; a backslash becomes `\\` so that an
/// escape cannot be forged either. Everything else passes unchanged.
public enum PrintableText {
  public static func escaped(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: needsEscape) else { return text }
    var result = ""
    result.reserveCapacity(text.utf8.count + 16)
    for scalar in text.unicodeScalars {
      if scalar == "\\" {
        result += "\\\\"
      } else if needsEscape(scalar) {
        result += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
      } else {
        result.unicodeScalars.append(scalar)
      }
    }
    return result
  }

  /// Whether `escaped` rewrites `scalar`.
  public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x5c: return true  // the escape character itself
    case 0x00...0x1f, 0x7f...0x9f: return true  // C0, DEL, C1 (NEL is U+0085)
    case 0x2028, 0x2029: return true  // line and paragraph separators
    case 0x061c, 0x200e, 0x200f, 0x202a...0x202e, 0x2066...0x2069: return true  // bidi controls
    case 0xfeff, 0xfff9...0xfffb: return true  // BOM, interlinear annotations
    default: return false
    }
  }
}
