/// One configuration problem, located: `file:line:column: key: message`.
public struct ConfigError: Error, Equatable, CustomStringConvertible, Sendable {
  public let file: String
  public let line: Int
  public let column: Int
  /// Dotted path of the key, e.g. `domains[2].pinnedPublicKeyHashes[0]`.
  public let key: String
  public let message: String

  public init(file: String, line: Int, column: Int, key: String, message: String) {
    self.file = file
    self.line = line
    self.column = column
    self.key = key
    self.message = message
  }

  /// A problem with the value written at `location` in `file`.
  public init(file: String, at location: Location, message: String) {
    self.init(file: file, line: location.line, column: location.column, key: location.key, message: message)
  }

  /// A problem with the file as a whole (line 0: it cannot be read, is not
  /// text, is too large) has no position, and one that belongs to no key (a
  /// YAML syntax error) has no key: neither is printed as an empty field.
  public var description: String {
    let place = line > 0 ? "\(file):\(line):\(column)" : file
    return key.isEmpty ? "\(place): \(message)" : "\(place): \(key): \(message)"
  }

  /// Whether the problem is with the file as a whole rather than a place in it.
  public var isAboutTheFile: Bool { line == 0 && key.isEmpty }
}

/// All the problems found in one configuration; `pinproxy check` prints each.
/// At most `listed` of them are kept (a file that repeats one mistake
/// thousands of times would otherwise log thousands of lines per reload);
/// a last line counts the rest.
public struct ConfigErrors: Error, CustomStringConvertible, Sendable {
  public static let listed = 50
  public let errors: [ConfigError]

  public init(errors: [ConfigError]) {
    guard errors.count > ConfigErrors.listed + 1 else {
      self.errors = errors
      return
    }
    let file = errors.first?.file ?? ""
    self.errors =
      Array(errors.prefix(ConfigErrors.listed)) + [
        ConfigError(
          file: file, line: 0, column: 0, key: "",
          message: "\(errors.count - ConfigErrors.listed) more errors not listed")
      ]
  }

  public var description: String { errors.map(\.description).joined(separator: "\n") }
}

extension Configuration {
  /// What `check` and `run` say of a file that configures no listener:
  /// the daemon would bind nothing and never become ready, so it is an
  /// error, not an empty success. (`evaluate`, `pins` and `import` read
  /// rules alone and take such files.)
  public var missingListeners: ConfigError? {
    guard listeners.isEmpty else { return nil }
    return ConfigError(
      file: file, line: 0, column: 0, key: "listeners",
      message:
        "no listener is configured, so pinproxy run would bind nothing; add one, e.g."
        + " listeners: [{name: forward, address: \"127.0.0.1:3128\", mode: forward}]")
  }
}
