import COpenSSL
import PinTrust

/// Reads the facts the pure profile checks need (`CertificateProfile`) with
/// OpenSSL's parser, once per certificate value.
extension X509Certificate {
  /// Extensions whose value must be exactly DER, re-encoded byte for byte:
  /// the ones the profile reads or names. keyUsage and basicConstraints are
  /// only decoded: old CAs wrote a BIT STRING with trailing zero bits or an
  /// explicit `cA FALSE`, which is BER but unambiguous.
  static let strictDERExtensions: Set<Int32> = [
    NID_info_access, NID_subject_alt_name, NID_name_constraints, NID_authority_key_identifier,
    NID_policy_constraints, NID_subject_key_identifier,
  ]
  /// `SEQUENCE SIZE (1..MAX)` types: an empty sequence (30 00) is malformed.
  static let nonEmptyExtensions: Set<Int32> = [
    NID_info_access, NID_subject_alt_name, NID_certificate_policies, NID_ext_key_usage,
    NID_crl_distribution_points,
  ]

  var profile: CertificateProfile {
    let flags = X509_get_extension_flags(pointer)
    let basicConstraints: CertificateProfile.BasicConstraints? =
      flags & UInt32(EXFLAG_BCONS) == 0
      ? nil
      : .init(isCA: flags & UInt32(EXFLAG_CA) != 0, critical: flags & UInt32(EXFLAG_BCONS_CRITICAL) != 0)
    let keyUsage = X509_get_key_usage(pointer)
    let hasAuthorityKeyID = X509_get_ext_by_NID(pointer, NID_authority_key_identifier, -1) >= 0
    return CertificateProfile(
      version: Int(X509_get_version(pointer)) + 1,
      extensionCount: Int(X509_get_ext_count(pointer)),
      basicConstraints: basicConstraints,
      assertsKeyCertSign: flags & UInt32(EXFLAG_KUSAGE) != 0 && keyUsage & UInt32(KU_KEY_CERT_SIGN) != 0,
      hasSubjectKeyIdentifier: X509_get0_subject_key_id(pointer) != nil,
      authorityKeyIdentifierHasKeyID: hasAuthorityKeyID ? X509_get0_authority_key_id(pointer) != nil : nil,
      subjectAltNameCritical: criticality(of: NID_subject_alt_name),
      subjectIsEmpty: X509_NAME_entry_count(X509_get_subject_name(pointer)) == 0,
      policyConstraintsCritical: criticality(of: NID_policy_constraints),
      nameConstraints: nameConstraints,
      malformedExtensions: malformedExtensions,
      isSelfSigned: X509_self_signed(pointer, 1) == 1,
      signatureDigest: signatureDigest)
  }

  /// nil when the extension is absent.
  func criticality(of nid: Int32) -> Bool? {
    let index = X509_get_ext_by_NID(pointer, nid, -1)
    guard index >= 0, let extensionValue = X509_get_ext(pointer, index) else { return nil }
    return X509_EXTENSION_get_critical(extensionValue) != 0
  }

  var malformedExtensions: [String] {
    var problems: [String] = []
    var seen: Set<Int32> = []
    for index in 0..<X509_get_ext_count(pointer) {
      guard let extensionValue = X509_get_ext(pointer, index) else { continue }
      let nid = OBJ_obj2nid(X509_EXTENSION_get_object(extensionValue))
      guard nid != NID_undef else { continue }
      let name = OBJ_nid2ln(nid).map { String(cString: $0) } ?? "extension \(nid)"
      if !seen.insert(nid).inserted { problems.append("\(name): appears twice") }
      if Self.nonEmptyExtensions.contains(nid), let data = X509_EXTENSION_get_data(extensionValue),
        ASN1_STRING_length(data) == 2, let bytes = ASN1_STRING_get0_data(data), bytes[0] == 0x30,
        bytes[1] == 0
      {
        problems.append("\(name): an empty sequence")
      }
      if pp_X509_EXTENSION_decodes(extensionValue, Self.strictDERExtensions.contains(nid) ? 1 : 0) == 0 {
        problems.append("\(name): not valid DER of its type")
      }
    }
    OpenSSLErrorQueue.clear()
    return problems
  }

  var nameConstraints: CertificateProfile.NameConstraints? {
    var critical: Int32 = -1
    guard let constraints = pp_X509_name_constraints(pointer, &critical) else {
      OpenSSLErrorQueue.clear()
      return nil  // absent, or malformed (reported by `malformedExtensions`)
    }
    defer { pp_NAME_CONSTRAINTS_free(constraints) }
    func subtrees(_ excluded: Int32) -> [CertificateProfile.Subtree]? {
      guard let stack = pp_NAME_CONSTRAINTS_subtrees(constraints, excluded) else { return nil }
      return (0..<pp_sk_GENERAL_SUBTREE_num(stack)).map { index in
        guard let base = pp_sk_GENERAL_SUBTREE_base(stack, index), pp_GENERAL_NAME_type(base) == GEN_DNS,
          let string = pp_GENERAL_NAME_string(base), let data = ASN1_STRING_get0_data(string)
        else { return .other }
        let bytes = UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(string)))
        return .dnsName(String(decoding: bytes, as: UTF8.self))
      }
    }
    return CertificateProfile.NameConstraints(
      critical: critical == 1, permitted: subtrees(0), excluded: subtrees(1))
  }

  var signatureDigest: String? {
    var digest: Int32 = 0
    var publicKey: Int32 = 0
    guard OBJ_find_sigid_algs(X509_get_signature_nid(pointer), &digest, &publicKey) == 1, digest != NID_undef,
      let name = OBJ_nid2sn(digest)
    else { return nil }
    return String(cString: name).lowercased()
  }
}
