import ArgumentParser
import PinConfig
import PinProxy

/// A configuration file read and compiled the way `check` does, for the
/// commands that act on a policy (`check`, `export`, `ct-hook`): any problem
/// is printed as `file:line:column: key: message` and exits 2, so no command
/// acts on a policy the daemon would refuse.
enum CheckedConfiguration {
  static func load(_ path: String) throws -> (configuration: Configuration, snapshot: RuntimeSnapshot) {
    nonisolated(unsafe) var compiled: RuntimeSnapshot?
    let problems = ConfigurationParser.check(file: path) { configuration throws(ConfigErrors) in
      compiled = try RuntimeSnapshot.compile(configuration, generation: 0)
    }
    guard problems.isEmpty, let compiled else {
      for line in InputFile.describe(problems) { printError(line) }
      throw ExitCode(2)
    }
    return (compiled.configuration, compiled)
  }
}
