import PinConfig
import PinTLS
import PinTrust

extension PinRotationAdvice {
  /// The advice for `failure` under `rule`, or nil when the pin is not known
  /// to be all that failed.
  static func make(
    _ failure: TrustFailure, rule: CompiledRule, snapshot: RuntimeSnapshot, presented: [Certificate]
  ) -> PinRotationAdvice? {
    let registry = snapshot.trust.registry
    guard let domain = rule.domain, !rule.policy.policy.allowInvalidCertificates else { return nil }
    let policy = rule.policy.policy
    let key: String
    let expected: [Digest256]
    let candidate: Certificate?
    let path: [Certificate]
    switch failure {
    case .pinMismatch(.publicKey, let pins, let seen):
      (key, expected, candidate, path) = ("pinnedPublicKeyHashes", pins, seen.first, seen)
    case .identityPinMismatch(.leaf, let pins, let seen):
      (key, expected, candidate, path) = ("pinnedLeafPublicKeyHashes", pins, seen.first, seen)
    case .identityPinMismatch(.certificateAuthority, let pins, let seen):
      (key, expected, candidate, path) = ("pinnedCAPublicKeyHashes", pins, seen.first, seen)
    default:
      return nil
    }
    guard let candidate else { return nil }
    // The anchor the path ends in, by set: a configured set's member, or the system store.
    let root = path.last ?? candidate
    let named = policy.anchors.first { name in
      name != SecurityPolicy.systemAnchors
        && registry.certificates(for: [name]).contains { SHA256.digest($0.der) == root.fingerprint }
    }
    let anchors = named ?? policy.anchors.joined(separator: ", ")
    let location = domain.pinKeyLocations[key] ?? domain.location
    let configured = (key == "pinnedPublicKeyHashes" ? domain.pinnedPublicKeyHashes : expected)
      .map { SPKIPin.format($0) }
    let quoted = (configured + [candidate.spkiPin]).map { "\"\($0)\"" }.joined(separator: ", ")
    var advice = PinRotationAdvice(
      anchors: anchors, pin: candidate.spkiPin, key: key, rule: rule.name,
      place: "\(snapshot.configuration.file):\(location.line)", yaml: "\(key): [\(quoted)]")
    if path.count > 1, !presented.contains(where: { $0.fingerprint == root.fingerprint }) {
      advice.unsentAnchor = root
    }
    return advice
  }
}
