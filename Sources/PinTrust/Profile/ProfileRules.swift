/// The RFC 5280 certificate profile, as OpenSSL checks it only under
/// `X509_V_FLAG_X509_STRICT` and beyond, plus the CA/Browser Forum's
/// common-name rule. A violation is `malformed-certificate`.
///
/// The trust anchor (the path's last certificate) is trusted because it was
/// configured, not because of its contents (RFC 5280 §6.1.1(d)), and the
/// system store holds roots that break the extension rules: Go Daddy and
/// Starfield Class 2 and Chunghwa ePKI have a non-critical basicConstraints,
/// Hongkong Post Root CA 1 and TWCA Global Root CA no subjectKeyIdentifier.
/// So the rules marked "not the anchor" skip it; every other rule, including
/// "a CA asserts basicConstraints cA" and "well-formed extensions", applies
/// to the anchor too.
enum ProfileRules {
  static func violation(in chain: [Certificate], baselineRequirements: Bool = true) -> ChainFailure? {
    let anchorDepth = chain.count - 1
    for (depth, certificate) in chain.enumerated() {
      if let detail = violation(
        of: certificate, depth: depth, isAnchor: depth == anchorDepth,
        baselineRequirements: baselineRequirements)
      {
        return ChainProfile.failure(.profileViolation, chain, depth, detail)
      }
    }
    return nil
  }

  static func violation(
    of certificate: Certificate, depth: Int, isAnchor: Bool, baselineRequirements: Bool = true
  ) -> String? {
    let profile = certificate.profile
    if let malformed = profile.malformedExtensions.first {
      return "RFC 5280 §4.2: malformed extension, \(malformed)"
    }
    if profile.version < 3 && profile.extensionCount > 0 {
      return "RFC 5280 §4.1.2.1: a certificate with extensions must be version 3"
    }
    // §4.2.1.1: the keyIdentifier "MUST be included" when the extension is.
    // Anchors included: a root without a keyIdentifier is as malformed as any other certificate.
    if profile.authorityKeyIdentifierHasKeyID == false {
      return "RFC 5280 §4.2.1.1: authorityKeyIdentifier without a keyIdentifier"
    }
    // §4.2.1.1: only a self-signed certificate may omit the extension. Not the
    // anchor (an anchor set may hold a sub-CA issued long ago).
    if !isAnchor && !profile.isSelfSigned && profile.authorityKeyIdentifierHasKeyID == nil {
      return "RFC 5280 §4.2.1.1: no authorityKeyIdentifier on a certificate that is not self-signed"
    }
    if depth > 0, let failure = caViolation(profile, isAnchor: isAnchor) { return failure }
    if profile.assertsKeyCertSign && !profile.isCA {
      return "RFC 5280 §4.2.1.3: keyUsage keyCertSign without basicConstraints cA=TRUE"
    }
    if profile.nameConstraints != nil && !profile.isCA {
      return "RFC 5280 §4.2.1.10: nameConstraints in an end-entity certificate"
    }
    if let critical = profile.subjectAltNameCritical {
      if profile.subjectIsEmpty && !critical {
        return "RFC 5280 §4.2.1.6: empty subject with a non-critical subjectAltName"
      }
      if !profile.subjectIsEmpty && critical {
        return "RFC 5280 §4.2.1.6: critical subjectAltName beside a non-empty subject"
      }
    }
    if let name = certificate.dnsNames.first(where: { !DNSNameSyntax.isValidSubjectAltName($0) }) {
      return "RFC 5280 §4.2.1.6: subjectAltName dNSName \"\(name)\""
        + " is not in preferred name syntax (ASCII letters, digits, hyphens)"
    }
    // The Baseline Requirements bind publicly trusted CAs only: a private
    // or national anchor set's CA follows RFC 5280, which has no such rule.
    if depth == 0, baselineRequirements, let failure = commonNameViolation(certificate) { return failure }
    return nil
  }

  /// A certificate that issued the one below it.
  static func caViolation(_ profile: CertificateProfile, isAnchor: Bool) -> String? {
    guard let constraints = profile.basicConstraints, constraints.isCA else {
      return "RFC 5280 §4.2.1.9: a CA certificate without basicConstraints cA=TRUE"
    }
    if isAnchor { return nil }
    if !constraints.critical {
      return "RFC 5280 §4.2.1.9: a CA certificate with a non-critical basicConstraints"
    }
    if !profile.hasSubjectKeyIdentifier {
      return "RFC 5280 §4.2.1.2: a CA certificate without subjectKeyIdentifier"
    }
    if profile.policyConstraintsCritical == false {
      return "RFC 5280 §4.2.1.11: a non-critical policyConstraints"
    }
    return nil
  }

  /// CA/Browser Forum BR 7.1.4.3: a common name that holds a name must be
  /// one of the subjectAltName values byte for byte (same case, the A-label
  /// and the canonical IP text). The CN is still never used to match a host.
  /// A CN that holds no name ("Acme Server"), or a leaf with no
  /// subjectAltName at all (which matches no host anyway), is not checked.
  static func commonNameViolation(_ leaf: Certificate) -> String? {
    guard let commonName = leaf.commonName, !leaf.dnsNames.isEmpty || !leaf.ipAddresses.isEmpty,
      holdsName(commonName)
    else { return nil }
    if leaf.dnsNames.contains(where: { $0.utf8.elementsEqual(commonName.utf8) }) { return nil }
    if leaf.ipAddresses.contains(where: { $0.description == commonName }) { return nil }
    return "CA/Browser Forum BR 7.1.4.3: common name \"\(commonName)\""
      + " is not one of the subjectAltName values"
  }

  /// A dotted run of letters, digits, hyphens, underscores and `*`, or an IP
  /// address: what a CN holding a host name or address looks like.
  static func holdsName(_ text: String) -> Bool {
    // Any form a resolver reads as an IPv4 address (0x7f000001, 017700000001).
    if IPAddress(text) != nil || NumericHost.ipv4(Substring(text)) != nil { return true }
    guard text.contains("."), text.contains(where: { $0 != "." }) else { return false }
    return text.unicodeScalars.allSatisfy { scalar in
      scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "-._*".unicodeScalars.contains(scalar)
    }
  }
}
