import Foundation
import PinConfig
import PinEventLoop
import PinHTTP
import PinTLS
import PinTrust
import Synchronization

/// `/policies`: every domain rule with its effective settings and the SPKI
/// pins it expects. No secrets: no keys, no passphrase files.
enum PolicyReport {
  /// A rule's list as `/policies` and `pinproxy pins show` print it.
  static func dynamicPins(_ store: DynamicPinStore, now: Date) -> [String: Any] {
    let state = store.snapshot
    let spec = store.spec
    var value: [String: Any] = [
      "url": spec.url.description, "useChallenge": spec.useChallenge,
      "expectedCommonNames": spec.expectedCommonNames, "source": state.list.source.rawValue,
      "version": state.version, "file": spec.file,
      "nextUpdate": AccessLine.dateTime(state.nextUpdate),
      "entries": state.list.entries.map { entry in
        [
          "name": entry.name, "fingerprint": entry.fingerprint.base64,
          "expires": AccessLine.dateTime(entry.expires), "expired": entry.isExpired(at: now),
        ] as [String: Any]
      },
    ]
    if let updated = state.lastSuccess { value["lastUpdate"] = AccessLine.dateTime(updated) }
    if let failure = state.lastFailure { value["lastFailure"] = failure }
    if let timestamp = state.list.timestamp { value["timestamp"] = timestamp }
    if let domains = state.list.domainsConfig,
      let data = try? JSONEncoder().encode(domains),
      let object = try? JSONSerialization.jsonObject(with: data)
    {
      value["domainsConfig"] = object
    }
    return value
  }

  static func revocation(_ settings: RevocationSettings) -> [String: String] {
    [
      "crl": settings.crl.rawValue, "ocsp": settings.ocsp.rawValue,
      "stapledOCSP": settings.stapledOCSP.rawValue,
    ]
  }

  /// Every CRL in force: each anchor set's files and what distribution
  /// points gave, with issuer, age and next update.
  static func crls(_ snapshot: RuntimeSnapshot, now: Date) -> [[String: Any]] {
    func describe(_ crl: CertificateRevocationList) -> [String: Any] {
      var entry: [String: Any] = [
        "issuer": crl.issuer, "thisUpdate": crl.thisUpdate.formatted(.iso8601),
        "ageSeconds": Int(now.timeIntervalSince(crl.thisUpdate).rounded(.down)), "entries": crl.entryCount,
      ]
      if let next = crl.nextUpdate {
        entry["nextUpdate"] = next.formatted(.iso8601)
        entry["nextUpdateSeconds"] = Int(next.timeIntervalSince(now).rounded(.down))
      }
      if let number = crl.number { entry["number"] = number }
      return entry
    }
    var all: [[String: Any]] = []
    for (set, entries) in snapshot.trust.registry.allCRLs {
      for entry in entries {
        var described = describe(entry.crl)
        described["anchorSet"] = set
        described["file"] = entry.path
        all.append(described)
      }
    }
    for stored in snapshot.revocation.fetched.crls.sorted(by: { $0.url < $1.url }) {
      var described = describe(stored.crl)
      described["distributionPoint"] = stored.url
      described["fetchedAt"] = stored.fetchedAt.formatted(.iso8601)
      all.append(described)
    }
    return all
  }

  /// A rule's pin health as `/policies` shows it.
  static func pinHealth(_ health: PinHealth) -> [String: Any] {
    var value: [String: Any] = [
      "chainSeen": health.chainSeen, "hasBackup": health.hasBackup, "singlePin": health.isSinglePin,
      "backupPins": health.backupPins, "warnings": health.warnings,
    ]
    if let matched = health.matched {
      value["matchedPin"] = matched.pin
      value["matchedSubject"] = matched.subject
      value["matchedNotAfter"] = matched.notAfter.formatted(.iso8601)
    }
    if let days = health.daysToExpiry { value["daysToExpiry"] = days }
    return value
  }

  /// A rule's parent proxy as its name and URL (never its credentials), or `direct`.
  static func parentProxy(_ parent: ParentProxy?) -> Any {
    guard let parent else { return "direct" }
    return ["name": parent.name, "url": parent.url, "credentials": parent.credentials != nil]
  }

  /// An unpinned issuance as `/policies` shows it.
  static func issuance(_ issuance: UnpinnedIssuance) -> [String: Any] {
    let sighting = issuance.sighting
    var value: [String: Any] = [
      "names": sighting.names, "spkiPin": SPKIPin.format(sighting.leafKey),
      "certificateSHA256": sighting.certificate.lowercaseHex, "issuer": sighting.issuer,
      "seen": sighting.seen.formatted(.iso8601), "reasons": issuance.reasons,
    ]
    if let notBefore = sighting.notBefore { value["notBefore"] = notBefore.formatted(.iso8601) }
    if let notAfter = sighting.notAfter { value["notAfter"] = notAfter.formatted(.iso8601) }
    return value
  }

  static func json(
    _ snapshot: RuntimeSnapshot, activity: RuleActivity? = nil, sightings: [IssuanceSighting] = []
  ) -> String {
    let unpinned = snapshot.unpinnedIssuances(sightings, at: Date())
    let health = Dictionary(
      snapshot.pinHealth(activity, at: Date()).map { ($0.rule, $0.health) },
      uniquingKeysWith: { first, _ in first })
    var rules: [[String: Any]] = []
    for compiled in snapshot.rules {
      guard let domain = compiled.domain else { continue }
      let policy = compiled.policy.policy
      var rule: [String: Any] = [
        "domain": domain.domain.description, "includesSubdomains": domain.includesSubdomains,
        "anchors": domain.anchors,
        "pinningMode": policy.pinningMode.rawValue, "validatesDomainName": policy.validatesDomainName,
        "allowInvalidCertificates": policy.allowInvalidCertificates,
        "minimumTLSVersion": domain.minimumTLSVersion.rawValue,
        "requiresForwardSecrecy": domain.requiresForwardSecrecy,
        "allowsInsecureHTTPLoads": domain.allowsInsecureHTTPLoads,
        "pinnedCertificates": policy.pinnedCertificates.map { certificate in
          [
            "subject": certificate.subject, "spkiPin": certificate.spkiPin,
            "sha256": certificate.fingerprint.base64,
          ]
        },
        "pinnedPublicKeyHashes": policy.pinnedPublicKeyHashes.map { SPKIPin.format($0) },
        "expectedPublicKeyPins": policy.pinningMode == .publicKey
          ? policy.expectedPublicKeyPins.map { SPKIPin.format($0) } : [],
      ]
      if let identity = domain.clientIdentity { rule["clientIdentity"] = ["pkcs12": identity.pkcs12.path] }
      if !policy.pinnedLeafPublicKeyHashes.isEmpty {
        rule["pinnedLeafPublicKeyHashes"] = policy.pinnedLeafPublicKeyHashes.map { SPKIPin.format($0) }
      }
      if !policy.pinnedCAPublicKeyHashes.isEmpty {
        rule["pinnedCAPublicKeyHashes"] = policy.pinnedCAPublicKeyHashes.map { SPKIPin.format($0) }
      }
      if let expires = policy.pinsExpire {
        let now = Date()
        rule["pinsExpire"] = expires.formatted(.iso8601)
        // Expired pins are not enforced (fail open): said in so many words.
        rule["pinsExpired"] = policy.hasStaticPins && expires <= now
        rule["pinsExpireSeconds"] = Int(expires.timeIntervalSince(now).rounded(.down))
      }
      if let health = health[compiled.name] { rule["pinHealth"] = pinHealth(health) }
      rule["requiresCertificateTransparency"] = domain.requiresCertificateTransparency
      rule["revocation"] = revocation(policy.revocation)
      if let store = compiled.pinStore { rule["dynamicPins"] = dynamicPins(store, now: Date()) }
      if let report = domain.report {
        rule["report"] = ["enforce": report.enforce, "uris": report.uris.map(\.uri)]
      }
      rule["parentProxy"] = parentProxy(compiled.parent)
      rule["unpinnedIssuances"] = (unpinned[compiled.name] ?? []).map(issuance)
      rules.append(rule)
    }
    let defaults = snapshot.configuration.defaults
    let report: [String: Any] = [
      "generation": snapshot.generation, "domains": rules,
      "defaults": [
        "action": defaults.action.rawValue, "minimumTLSVersion": defaults.minimumTLSVersion.rawValue,
        "requiresForwardSecrecy": defaults.requiresForwardSecrecy,
        "revocation": revocation(defaults.revocation),
        "parentProxy": parentProxy(snapshot.defaultParent),
      ],
      "crls": crls(snapshot, now: Date()),
    ]
    guard
      let data = try? JSONSerialization.data(
        withJSONObject: report, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
    else {
      return "{}\n"
    }
    return String(decoding: data, as: UTF8.self) + "\n"
  }
}
