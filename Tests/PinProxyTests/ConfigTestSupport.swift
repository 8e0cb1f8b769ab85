import Foundation
import PinConfig
import PinProxy

/// Writes config text to a temporary directory beside copies of named files.
struct TemporaryConfig {
  let directory: URL
  let file: String

  init(_ text: String, files: [String: String] = [:]) throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    for (name, source) in files {
      try FileManager.default.copyItem(atPath: source, toPath: directory.appendingPathComponent(name).path)
    }
    file = directory.appendingPathComponent("pinproxy.yaml").path
    try Data(text.utf8).write(to: URL(fileURLWithPath: file))
  }

  func remove() { try? FileManager.default.removeItem(at: directory) }

  /// The errors of parsing and compiling, or none.
  func errors() -> [ConfigError] {
    do {
      _ = try TrustSnapshot.compile(try ConfigurationParser.load(file: file), generation: 1)
      return []
    } catch {
      return error.errors
    }
  }
}
