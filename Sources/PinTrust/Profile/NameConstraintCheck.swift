/// Name constraints beyond what OpenSSL checks (RFC 5280 §4.2.1.10).
///
/// OpenSSL tests each subjectAltName against the constraints as a string,
/// so `*.example.com` passes a CA that excludes `bar.example.com` (the
/// pattern is not inside the excluded subtree) and then matches the host
/// `bar.example.com`. RFC 9525 leaves the gap open; we close it by testing
/// the host the connection is for, the name a wildcard actually stands for,
/// against every dNSName constraint of every CA in the path (anchor
/// included, as OpenSSL applies the anchor's own constraints). A violation
/// is `untrusted-chain`, the code OpenSSL's own constraint failures get.
///
/// Constraints that are themselves malformed refuse the path as
/// `malformed-certificate`: both subtree lists absent, a list present but
/// empty, or a dNSName written with a leading period or not in preferred
/// name syntax (`.example.com` is a URI or mailbox form; read as a DNS
/// constraint it has been given two incompatible meanings).
enum NameConstraintCheck {
  static func violation(in chain: [Certificate], host: TrustHost?) -> ChainFailure? {
    for (depth, certificate) in chain.enumerated() {
      guard let constraints = certificate.profile.nameConstraints else { continue }
      if let problem = malformation(constraints) {
        return ChainProfile.failure(.profileViolation, chain, depth, "RFC 5280 §4.2.1.10: \(problem)")
      }
      guard depth > 0, case .dns(let name) = host else { continue }
      if let excluded = constraints.excluded?.dnsNames.first(where: { within(name, $0) }) {
        return ChainProfile.failure(
          .nameConstraints, chain, depth,
          "name constraints exclude \(name) (the subtree \"\(excluded)\"), whichever leaf name matched it")
      }
      if let permitted = constraints.permitted?.dnsNames, !permitted.isEmpty,
        !permitted.contains(where: { within(name, $0) })
      {
        return ChainProfile.failure(
          .nameConstraints, chain, depth,
          "name constraints do not permit \(name) (permitted: \(permitted.joined(separator: ", ")))")
      }
    }
    return nil
  }

  static func malformation(_ constraints: CertificateProfile.NameConstraints) -> String? {
    if (constraints.permitted ?? []).isEmpty && (constraints.excluded ?? []).isEmpty {
      if constraints.permitted == nil && constraints.excluded == nil {
        return "nameConstraints with neither permitted nor excluded subtrees"
      }
      return "nameConstraints whose subtrees are empty"
    }
    if constraints.permitted?.isEmpty == true || constraints.excluded?.isEmpty == true {
      return "nameConstraints with an empty subtree list"
    }
    let all = (constraints.permitted ?? []).dnsNames + (constraints.excluded ?? []).dnsNames
    if let bad = all.first(where: { !DNSNameSyntax.isValidConstraint($0) }) {
      return
        "dNSName constraint \"\(bad)\" is malformed (a leading period or a character outside"
        + " preferred name syntax)"
    }
    return nil
  }

  /// A name is within a dNSName subtree when it equals it or ends with a dot
  /// followed by it, compared without regard to case; the empty subtree holds
  /// every name. `host` is already lower case (TrustHost).
  static func within(_ host: String, _ subtree: String) -> Bool {
    let base = subtree.lowercased()
    if base.isEmpty { return true }
    return host == base || host.hasSuffix("." + base)
  }
}

extension [CertificateProfile.Subtree] {
  var dnsNames: [String] {
    compactMap { subtree in
      if case .dnsName(let name) = subtree { return name }
      return nil
    }
  }
}
