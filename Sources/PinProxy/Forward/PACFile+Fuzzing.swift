/// The PAC writer as the fuzzer drives it (Fuzz/Sources/FuzzPAC): the
/// input is cut at NUL bytes into a listener name, a proxy address and
/// host names (the first byte says which are `*.domain` entries and
/// whether the policy denies by default), none of them validated first.
/// Properties: every line of the file is one the writer makes (two
/// comments, the function's opening and its `if` and `return` lines, the
/// closing brace); no line break, control character or U+2028/U+2029 of
/// the input reaches it unescaped; `FindProxyForURL` is defined once.
@_spi(Fuzzing) public enum PACFuzzing {
  /// Returns the property that failed, or nil.
  public static func run(_ bytes: [UInt8]) -> String? {
    guard let control = bytes.first else { return nil }
    let parts = bytes.dropFirst().split(separator: 0, omittingEmptySubsequences: false).map {
      String(decoding: $0, as: UTF8.self)
    }
    let listener = parts.first ?? ""
    let proxy = parts.count > 1 ? parts[1] : "127.0.0.1:3128"
    var exact: [String] = []
    var suffixes: [String] = []
    for (index, name) in parts.dropFirst(2).enumerated() {
      if (Int(control) >> (index % 7)) & 1 == 1 { suffixes.append(name) } else { exact.append(name) }
    }
    let text = PACFile.text(
      listener: listener, generation: UInt64(control), exact: exact, suffixes: suffixes,
      denyByDefault: control & 0x80 != 0, proxy: proxy)
    for scalar in text.unicodeScalars where scalar != "\n" {
      if scalar.value < 0x20 || scalar.value >= 0x7f {
        return "an unescaped U+\(String(scalar.value, radix: 16)) in the file"
      }
    }
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { skeleton($0) }
    guard lines.count >= 7, lines.last == "" else { return "the file does not end with a line" }
    guard lines[0].hasPrefix("// pinproxy "), lines[0].hasSuffix(": listener S, generation \(control)"),
      lines[1].hasPrefix("// Hosts the policy governs"), lines[2] == "function FindProxyForURL(url, host) {",
      lines[lines.count - 2] == "}"
    else { return "the file's frame is not the writer's: \(lines)" }
    for line in lines[3..<(lines.count - 2)] where !templates.contains(line) {
      return "a line the writer does not make: \(line)"
    }
    return nil
  }

  /// The lines the writer makes, each string literal written as `S`.
  static let templates: Set<String> = [
    "  host = host.toLowerCase();",
    "  if (host.charAt(host.length - 1) == S) host = host.substring(0, host.length - 1);",
    "  if (host == S) return S;",
    "  if (host == S || dnsDomainIs(host, S)) return S;",
    "  return S;",
  ]

  /// `line` with every JavaScript string literal (backslash escapes
  /// honoured) replaced by `S`: what is left is the code around them. An
  /// unterminated literal leaves a `?` the templates never match.
  static func skeleton(_ line: Substring) -> String {
    var out = ""
    var inLiteral = false
    var escaped = false
    for character in line {
      if inLiteral {
        if escaped {
          escaped = false
        } else if character == "\\" {
          escaped = true
        } else if character == "\"" {
          inLiteral = false
          out.append("S")
        }
      } else if character == "\"" {
        inLiteral = true
      } else {
        out.append(character)
      }
    }
    return inLiteral ? out + "?" : out
  }
}
