import Foundation
import PinTrust

/// A sighting that a rule in force would refuse, with the reasons.
public struct UnpinnedIssuance: Sendable {
  public let sighting: IssuanceSighting
  public let reasons: [String]
}

extension RuntimeSnapshot {
  /// The domain rules that govern a name a certificate carries: the rule
  /// the host routes to; for a wildcard `*.B`, every rule for a name one
  /// label below B (the certificate serves it) and the rule covering B's
  /// subdomains.
  public func rules(forCertificateName name: String) -> [CompiledRule] {
    let lower = name.lowercased()
    guard lower.hasPrefix("*.") else {
      guard let host = TrustHost(lower), let rule = rule(governing: host), rule.domain != nil else {
        return []
      }
      return [rule]
    }
    let base = String(lower.dropFirst(2))
    var found = rules.filter { rule in
      let domain = rule.name
      return domain.hasSuffix("." + base) && !domain.dropLast(base.count + 1).contains(".")
    }
    let parent = rules.filter { rule in
      guard rule.domain?.includesSubdomains == true else { return false }
      return base == rule.name || base.hasSuffix("." + rule.name)
    }.max { $0.name.count < $1.name.count }
    if let parent, !found.contains(where: { $0 === parent }) { found.append(parent) }
    return found
  }

  /// Each sighting judged under the rules in force at `time`, by rule name:
  /// only those a rule would refuse (a renewal that keeps a pinned key is
  /// not there). A sighting appears once per rule, however many of its
  /// names fall under it.
  public func unpinnedIssuances(_ sightings: [IssuanceSighting], at time: Date) -> [String:
    [UnpinnedIssuance]]
  {
    var byRule: [String: [UnpinnedIssuance]] = [:]
    var lists: [ObjectIdentifier: [Digest256]] = [:]
    for sighting in sightings {
      var judged = Set<ObjectIdentifier>()
      for name in sighting.names {
        for rule in rules(forCertificateName: name) where judged.insert(ObjectIdentifier(rule)).inserted {
          var list: [Digest256]?
          if let store = rule.pinStore {
            list =
              lists[ObjectIdentifier(rule)]
              ?? store.snapshot.list.usable(at: time).map(\.fingerprint)
            lists[ObjectIdentifier(rule)] = list
          }
          if case .unpinned(let reasons) = sighting.judge(rule.policy.policy, dynamicList: list, at: time) {
            byRule[rule.name, default: []].append(UnpinnedIssuance(sighting: sighting, reasons: reasons))
          }
        }
      }
    }
    return byRule
  }
}

extension UnpinnedIssuance {
  /// One sentence for the operator's page and `/status`.
  static func warning(_ issuance: UnpinnedIssuance) -> String {
    let sighting = issuance.sighting
    let names = sighting.names.prefix(3).joined(separator: ", ") + (sighting.names.count > 3 ? ", …" : "")
    let validity = sighting.notBefore.map { "; valid from \($0.formatted(.iso8601))" } ?? ""
    return
      "a certificate for \(names) was issued (seen in CT \(sighting.seen.formatted(.iso8601))\(validity);"
      + " issuer \(sighting.issuer)) with key \(SPKIPin.format(sighting.leafKey)) that clients pinned by this"
      + " rule would refuse: \(issuance.reasons.joined(separator: "; ")). Add its pin before it is deployed."
  }
}

extension RuntimeSnapshot {
  /// `pinproxy_pin_unpinned_issuances{rule}`: for every rule that pins, how
  /// many sightings its pins do not cover (0 included, so an alert can tell
  /// a pinned rule with none from a rule that is gone).
  func unpinnedIssuanceCounts(_ sightings: [IssuanceSighting], at time: Date) -> [(rule: String, count: Int)]
  {
    let unpinned = unpinnedIssuances(sightings, at: time)
    return rules.filter(\.pins).map { ($0.name, unpinned[$0.name]?.count ?? 0) }
  }
}

extension ProxyMetrics {
  /// `pinproxy_pin_unpinned_issuances{rule}`, when any rule pins.
  static func renderUnpinnedIssuances(_ counts: [(rule: String, count: Int)], into out: inout String) {
    guard !counts.isEmpty else { return }
    let name = "pinproxy_pin_unpinned_issuances"
    out +=
      "# HELP \(name) Certificates seen in CT logs (pinproxy ct-hook) for the rule's names with a key no pin of the rule covers.\n"
    out += "# TYPE \(name) gauge\n"
    for (rule, count) in counts {
      out += "\(name){rule=\"\(ProxyMetrics.escape(rule))\"} \(count)\n"
    }
  }
}
