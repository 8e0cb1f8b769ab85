import ArgumentParser
import Foundation
import PinConfig
import PinHTTP
import PinProxy
import PinTrust

struct CheckCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "check",
    abstract: "Validate a configuration file and every file it names.",
    discussion: """
      Prints each problem as file:line:column: key: message and exits 2, or exits 0. \
      A file that cannot be read at all is reported as --config FILE: problem.
      """)

  @Option(name: .long, help: "The configuration file.")
  var config: String

  func run() throws {
    let (configuration, snapshot) = try CheckedConfiguration.load(config)
    let compiled: RuntimeSnapshot? = snapshot
    if let missing = configuration.missingListeners {
      printError(missing.description)
      throw ExitCode(2)
    }
    // Expired pins fail open: `check` says so, and 30 days ahead (exit stays 0).
    let now = Date()
    for notice in PinExpiryNotice.notices(for: configuration, at: now) {
      let place = notice.location.map { "\(config):\($0.line):\($0.column): \($0.key): " } ?? "\(config): "
      printError("\(place)warning: \(notice.message(at: now))")
    }
    for notice in AccessNotice.notices(for: configuration) {
      let place = notice.location.map { "\(config):\($0.line):\($0.column): \($0.key): " } ?? "\(config): "
      printError("\(place)warning: \(notice.message)")
    }
    for (location, message) in compiled?.passthroughWaivers ?? [] {
      let place = location.map { "\(config):\($0.line):\($0.column): \($0.key): " } ?? "\(config): "
      printError("\(place)warning: \(PrintableText.escaped(message))")
    }
    for (location, message) in compiled?.htpasswdWarnings ?? [] {
      printError(
        "\(config):\(location.line):\(location.column): \(location.key): warning: \(PrintableText.escaped(message))"
      )
    }
    // Pin health as far as it is known offline: a single pin without a
    // dynamic list; in certificate mode, pinned certificates about to expire.
    for (rule, health) in compiled?.configuredPinHealth(at: now) ?? [] {
      let location = configuration.domains.first { $0.domain.description == rule }?.location
      let place = location.map { "\(config):\($0.line):\($0.column): \($0.key): " } ?? "\(config): "
      for warning in health.warnings { printError("\(place)warning: rule \(rule): \(warning)") }
    }
    // Pin health against the chain the daemon last saw each rule accept
    // (state directory): pins that all sit on certificates in service.
    let served = ServedChains.read(
      ServedChains.path(stateDirectory: StateDirectory.resolve(configuration.stateDirectory)))
    for rule in snapshot.rules where rule.pins {
      guard let entry = served[rule.name] else { continue }
      let health = PinHealth.assess(
        rule.policy.policy, chain: entry.chain, hasDynamicList: rule.pinStore != nil, at: now)
      guard health.hasNoOfflineBackup else { continue }
      let place =
        rule.domain.map { "\(config):\($0.location.line):\($0.location.column): \($0.location.key): " } ?? ""
      printError(
        "\(place)warning: rule \(rule.name): every pin is on the chain it served at"
          + " \(entry.seen.formatted(.iso8601)) (\(health.configuredPins.joined(separator: ", "))): no offline backup"
          + " pin; add the pin of a key not yet deployed before those keys are replaced")
    }
    print(
      "\(config): ok (\(configuration.listeners.count) listeners, \(configuration.domains.count) domain rules,"
        + " defaults: \(configuration.defaults.action.rawValue))")
  }
}
