/// Writes an `ImportedConfig` as a pinproxy configuration: `anchorSets`,
/// `defaults`, `certificateTransparency` and `domains`, each setting with a
/// comment naming the app key it came from. Every string is written
/// double-quoted and escaped, and comments are reduced to printable ASCII,
/// so no text from the app's file can add a key or end a comment early.
/// (The notes on standard error go through `PrintableText`, as every
/// untrusted string bound for a terminal.)
public enum YAMLWriter {
  public static func write(_ config: ImportedConfig) -> String {
    var out =
      "# pinproxy rules imported from \(comment(config.input)) (\(config.format)) by `pinproxy import`.\n"
    out += "# Each setting names the key it came from. Add listeners (and the rest of\n"
    out += "# your configuration) around these sections; `pinproxy check` reads them as they are.\n"
    if !config.dropped.isEmpty {
      out += "# NOT carried over (the app decided these differently; see standard error):\n"
      for line in config.dropped { out += "#   - \(comment(line))\n" }
    }
    if !config.anchorSets.isEmpty {
      out += "anchorSets:\n"
      for set in config.anchorSets {
        out += "  \(quote(set.name)): {files: [\(quote(set.file))]}  # \(comment(set.source))\n"
      }
    }
    if !config.defaults.isEmpty {
      out += "defaults:\n"
      for setting in config.defaults {
        out += "  \(setting.key): \(setting.value)  # \(comment(setting.source))\n"
      }
    }
    if let logList = config.transparencyLogList {
      out += "certificateTransparency:\n"
      out += "  logList: \(quote(logList))  # needed by requiresCertificateTransparency\n"
      out += "  minimumSCTs: 2\n"
    }
    out += "domains:"
    if config.rules.isEmpty { return out + " []\n" }
    out += "\n"
    for rule in config.rules {
      out += "  # " + rule.sources.map(comment).joined(separator: " + ") + "\n"
      out += "  - domain: \(quote(rule.domain))\n"
      for setting in rule.settings {
        out += "    \(setting.key): \(setting.value)  # \(comment(setting.source))\n"
      }
    }
    return out
  }

  /// A YAML double-quoted scalar.
  public static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\t": out += "\\t"
      default:
        if scalar.value < 0x20 || scalar.value == 0x7f || (0x80...0x9f).contains(scalar.value)
          || scalar.value == 0x2028 || scalar.value == 0x2029 || scalar.value == 0xfeff
        {
          let hex = String(scalar.value, radix: 16, uppercase: true)
          out += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        } else {
          out.unicodeScalars.append(scalar)
        }
      }
    }
    return out + "\""
  }

  /// A flow list of quoted strings.
  public static func list(_ items: [String]) -> String {
    "[" + items.map(quote).joined(separator: ", ") + "]"
  }

  /// Printable ASCII only, for comments and notes.
  public static func comment(_ text: String) -> String {
    String(
      String.UnicodeScalarView(
        text.unicodeScalars.map { $0.value >= 0x20 && $0.value < 0x7f ? $0 : "?" }))
  }
}
