import PinTrust

/// What to do about a pin failure on a chain that passed every other check
/// (anchors, host, dates): what separates a key rotation from an attack.
/// Names the pin to add (the leaf's key for a leaf or any-key pin, its
/// issuer's for a CA pin), the key and rule to add it to and where the rule
/// is written, and the YAML line to paste. Built (`make`, in Upstream) only
/// when the failure is known to be the pin alone: never under
/// `allowInvalidCertificates` (nothing else was checked) nor in certificate
/// mode (the pinned certificates are the anchors there).
struct PinRotationAdvice: Sendable {
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
  var unsentAnchor: Certificate?

  var sentence: String {
    "the chain is otherwise valid: anchors \(anchors), host ok, not expired — only the pin failed;"
      + " if the server rotated its key, add \(pin) to \(key) of rule \(rule) (\(place)), then reload"
  }
}
