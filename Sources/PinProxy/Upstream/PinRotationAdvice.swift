import PinConfig
import PinTLS
import PinTrust

/// What to do about a pin failure on a chain that passed every other check
/// (anchors, host, dates): what separates a key rotation from an attack.
/// Names the pin to add (the leaf's key for a leaf or any-key pin, its
/// issuer's for a CA pin), the key and rule to add it to and where the rule
/// is written, and the YAML line to paste. Built only when the failure is
/// known to be the pin alone: never under `allowInvalidCertificates`
/// (nothing else was checked) nor in certificate mode (the pinned
/// certificates are the anchors there).
struct PinRotationAdvice: Sendable, Codable {
  /// The anchor set the path ended in (`system`: the operating system's store).
  let anchors: String
  /// `sha256/BASE64` to add.
  let pin: String
  /// The configuration key that takes it.
  let key: String
  let rule: String
  /// `FILE:LINE` of the key (or of the rule, when the key is not written).
  let place: String
  /// The key's line with the new pin added, ready to paste.
  let yaml: String
  /// The anchor's certificate when the server did not send it (the page
  /// shows it in the chain the reason names).
  var unsentAnchor: PresentedCertificate?

  var sentence: String {
    "the chain is otherwise valid: anchors \(anchors), host ok, not expired — only the pin failed;"
      + " if the server rotated its key, add \(pin) to \(key) of rule \(rule) (\(place)), then reload"
  }

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
      var anchor = PresentedCertificate(root, expected: RuleExpectation(rule))
      anchor.unsent = true
      advice.unsentAnchor = anchor
    }
    return advice
  }
}
