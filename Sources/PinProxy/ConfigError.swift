/// One configuration problem, located: `file:line:column: key: message`.
public struct ConfigError: Error, Equatable, CustomStringConvertible, Sendable {
  public let file: String
  public let line: Int
  public let column: Int
  /// Dotted path of the key, e.g. `domains[2].pinnedPublicKeyHashes[0]`.
  public let key: String
  public let message: String

  public var description: String { "\(file):\(line):\(column): \(key): \(message)" }
}

/// All the problems found in one configuration; `pinproxy check` prints each.
public struct ConfigErrors: Error, CustomStringConvertible, Sendable {
  public let errors: [ConfigError]
  public var description: String { errors.map(\.description).joined(separator: "\n") }
}
