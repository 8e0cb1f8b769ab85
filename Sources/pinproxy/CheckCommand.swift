import ArgumentParser
import PinProxy

struct CheckCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "check",
    abstract: "Validate a configuration file and every file it names.",
    discussion: "Prints each problem as file:line:column: key: message and exits 2, or exits 0.")

  @Option(name: .long, help: "The configuration file.")
  var config: String

  func run() throws {
    do {
      let configuration = try ConfigurationParser.load(file: config)
      let snapshot = try TrustSnapshot.compile(configuration, generation: 1)
      print(
        "\(config): ok (\(configuration.listeners.count) listeners, \(snapshot.domainPolicies.count) domain rules,"
          + " defaults: \(configuration.defaults.action.rawValue))")
    } catch {
      for problem in error.errors { printError(problem.description) }
      throw ExitCode(2)
    }
  }
}
