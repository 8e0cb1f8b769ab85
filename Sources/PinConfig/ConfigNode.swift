import Yams

/// A YAML node with its location and key path, and typed accessors that record
/// an error (file, line, key) instead of throwing, so one pass reports every
/// problem in the file.
struct ConfigNode {
  let node: Node
  let path: String
  let reader: ConfigReader

  var line: Int { node.mark?.line ?? 0 }
  var column: Int { node.mark?.column ?? 0 }

  func error(_ message: String) { reader.record(self, message) }

  var string: String? {
    guard case .scalar(let scalar) = node else {
      error("expected a string")
      return nil
    }
    return scalar.string
  }

  var bool: Bool? {
    guard case .scalar(let scalar) = node, let value = Bool.construct(from: scalar) else {
      error("expected true or false")
      return nil
    }
    return value
  }

  var int: Int? {
    guard case .scalar(let scalar) = node, let value = Int(scalar.string) else {
      error("expected a whole number")
      return nil
    }
    return value
  }

  /// The elements of a sequence, each with its indexed path.
  var sequence: [ConfigNode]? {
    guard case .sequence(let sequence) = node else {
      error("expected a list")
      return nil
    }
    return sequence.enumerated().map { index, element in
      ConfigNode(node: element, path: "\(path)[\(index)]", reader: reader)
    }
  }

  var strings: [String]? { sequence.map { $0.compactMap(\.string) } }

  /// A mapping whose keys must all be in `allowed`; unknown and repeated keys are errors.
  func mapping(allowed: Set<String>) -> ConfigMapping? {
    guard case .mapping(let mapping) = node else {
      error("expected a mapping")
      return nil
    }
    var values: [String: ConfigNode] = [:]
    var misspelled: Set<String> = []
    for (keyNode, valueNode) in mapping {
      let childPath = path.isEmpty ? (keyNode.string ?? "?") : "\(path).\(keyNode.string ?? "?")"
      let keyed = ConfigNode(node: keyNode, path: childPath, reader: reader)
      guard let key = keyNode.string else {
        keyed.error("expected a string key")
        continue
      }
      guard allowed.contains(key) else {
        let expected = "expected one of: \(allowed.sorted().joined(separator: ", "))"
        if let near = KeySuggestion.closest(to: key, among: allowed) {
          misspelled.insert(near)
          keyed.error("unknown key; did you mean \(near)? (\(expected))")
        } else {
          keyed.error("unknown key (\(expected))")
        }
        continue
      }
      guard values[key] == nil else {
        keyed.error("key appears twice")
        continue
      }
      values[key] = ConfigNode(node: valueNode, path: childPath, reader: reader)
    }
    return ConfigMapping(values: values, owner: self, misspelled: misspelled)
  }

  /// One key's value, looked up without judging the mapping's other keys
  /// (they are judged, once, where the mapping itself is read).
  func peek(_ key: String) -> ConfigNode? {
    guard case .mapping(let mapping) = node else { return nil }
    for (keyNode, valueNode) in mapping where keyNode.string == key {
      return ConfigNode(node: valueNode, path: path.isEmpty ? key : "\(path).\(key)", reader: reader)
    }
    return nil
  }

  /// The entries of a mapping whose keys are names chosen by the user (anchor sets).
  var namedEntries: [(name: String, node: ConfigNode)]? {
    guard case .mapping(let mapping) = node else {
      error("expected a mapping")
      return nil
    }
    return mapping.compactMap { keyNode, valueNode in
      guard let name = keyNode.string else { return nil }
      return (name, ConfigNode(node: valueNode, path: "\(path).\(name)", reader: reader))
    }
  }
}

struct ConfigMapping {
  let values: [String: ConfigNode]
  let owner: ConfigNode
  /// Valid keys that an unknown key of this mapping was taken for a
  /// misspelling of: a check that follows from such a key's absence would
  /// only repeat the unknown-key error as a consequence.
  let misspelled: Set<String>

  subscript(key: String) -> ConfigNode? { values[key] }

  /// A key that must be present; its absence is recorded against the mapping.
  func required(_ key: String) -> ConfigNode? {
    if let value = values[key] { return value }
    owner.reader.record(
      ConfigNode(
        node: owner.node, path: owner.path.isEmpty ? key : "\(owner.path).\(key)", reader: owner.reader),
      "required key is missing")
    return nil
  }

  /// An enumerated string value.
  func choice<T: RawRepresentable>(_ key: String, default fallback: T) -> T
  where T.RawValue == String, T: CaseIterable {
    guard let node = values[key], let text = node.string else { return fallback }
    guard let value = T(rawValue: text) else {
      // Values are exact, but the suggestion ignores case: `publickey` means `publicKey`.
      let allowed = T.allCases.map(\.rawValue)
      let near = KeySuggestion.closest(to: text, among: Set(allowed)).map { "; did you mean \($0)?" } ?? ""
      node.error("\"\(text)\" is not one of: \(allowed.joined(separator: ", "))\(near)")
      return fallback
    }
    return value
  }
}

/// Collects the errors of one file, at most `limit` of them: a file with a
/// repeated mistake must not produce a log line per repetition.
final class ConfigReader {
  let file: String
  let limit: Int
  private(set) var errors: [ConfigError] = []
  private var suppressed = 0

  init(file: String, limit: Int = 50) {
    self.file = file
    self.limit = limit
  }

  func record(_ node: ConfigNode, _ message: String) {
    record(line: node.line, column: node.column, key: node.path, message)
  }

  func record(line: Int, column: Int, key: String, _ message: String) {
    guard errors.count < limit else {
      suppressed += 1
      return
    }
    errors.append(ConfigError(file: file, line: line, column: column, key: key, message: message))
  }

  /// The errors kept, and one more line counting those left out.
  var reportedErrors: [ConfigError] {
    guard suppressed > 0 else { return errors }
    return errors + [
      ConfigError(
        file: file, line: 0, column: 0, key: "", message: "\(suppressed) more errors not listed")
    ]
  }
}
