import Foundation
import PinConfig
import PinTrust

/// What the operator's views read from a snapshot: each rule's expectations
/// (recorded with its refusals) and pin health.
extension RuntimeSnapshot {
  /// Each rule's expectations by name, recorded with its refusals.
  var ruleExpectations: [String: RuleExpectation] {
    var all: [String: RuleExpectation] = [:]
    for rule in rules + (defaultRule.map { [$0] } ?? []) { all[rule.name] = RuleExpectation(rule) }
    return all
  }

  /// Each pinned rule's pin health as the configuration alone tells it
  /// (`pinproxy check`).
  public func configuredPinHealth(at time: Date) -> [(rule: String, health: PinHealth)] {
    pinHealth(nil, at: time)
  }

  /// Each pinned rule's pin health: from the last chain it accepted, else
  /// from its configuration.
  func pinHealth(_ activity: RuleActivity?, at time: Date) -> [(rule: String, health: PinHealth)] {
    rules.compactMap { rule in
      let policy = rule.policy.policy
      guard policy.pinningMode != .none else { return nil }
      let health =
        activity?.health(of: rule)
        ?? PinHealth.configured(policy, hasDynamicList: rule.pinStore != nil, at: time)
      return (rule.name, health)
    }
  }
}

extension RuntimeSnapshot {
  /// htpasswd files whose entries mix bcrypt costs, with where each is
  /// named (`pinproxy check` warns): a failed check waits as long as the
  /// costliest entry takes, so a cheaper entry only weakens its own hash.
  public var htpasswdWarnings: [(location: Location, message: String)] {
    configuration.listeners.compactMap { listener in
      guard let config = listener.proxyAuth, let file = access[listener.name]?.authenticator?.file,
        let costs = file.mixedCosts
      else { return nil }
      return (
        config.htpasswd.location,
        "\(config.htpasswd.path) mixes bcrypt costs \(costs.map(String.init).joined(separator: ", "));"
          + " a failed check takes as long as the costliest, so re-create the cheaper entries with"
          + " htpasswd -B -C \(costs.last ?? 0)"
      )
    }
  }
}

extension RuntimeSnapshot {
  /// `passthrough` entries that name a host whose rule pins: each waives
  /// that rule's pins for tunnels through its listener (`check` warns, and
  /// the daemon at start and on every reload).
  public var passthroughWaivers: [(location: Location?, message: String)] {
    configuration.listeners.flatMap { listener in
      listener.passthrough.enumerated().compactMap { index, entry -> (Location?, String)? in
        guard !entry.hasPrefix("*."), let host = TrustHost(entry), let rule = rule(governing: host),
          rule.pins
        else { return nil }
        let location =
          index < listener.passthroughLocations.count ? listener.passthroughLocations[index] : nil
        return (
          location,
          "passthrough entry \(entry) of listener \(listener.name) waives the pins of rule \(rule.name):"
            + " CONNECTs to it are spliced raw and no pin is checked"
        )
      }
    }
  }
}
