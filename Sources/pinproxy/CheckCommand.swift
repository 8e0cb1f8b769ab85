import ArgumentParser
import PinConfig
import PinProxy

struct CheckCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "check",
    abstract: "Validate a configuration file and every file it names.",
    discussion: "Prints each problem as file:line:column: key: message and exits 2, or exits 0.")

  @Option(name: .long, help: "The configuration file.")
  var config: String

  func run() throws {
    let problems = ConfigurationParser.check(file: config) { configuration throws(ConfigErrors) in
      _ = try RuntimeSnapshot.compile(configuration, generation: 0)
    }
    guard problems.isEmpty else {
      for problem in problems { printError(problem.description) }
      throw ExitCode(2)
    }
    let configuration = try ConfigurationParser.load(file: config)
    print(
      "\(config): ok (\(configuration.listeners.count) listeners, \(configuration.domains.count) domain rules,"
        + " defaults: \(configuration.defaults.action.rawValue))")
  }
}
