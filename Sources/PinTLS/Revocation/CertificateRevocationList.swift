import COpenSSL
import Foundation
import PinTrust

/// Owns one parsed `X509_CRL` (RFC 5280 §5), with what every use of it
/// needs read once: issuer, dates, number, scope, and the defects that make
/// it unusable whatever certificate it is asked about.
///
/// Immutable after `init` but for the memo of issuers it was checked
/// against (locked); OpenSSL allows concurrent reads of a CRL.
public final class CertificateRevocationList: @unchecked Sendable {
  let pointer: OpaquePointer
  public let der: [UInt8]
  /// The DER issuer name: the key CRLs are found by.
  public let issuerName: [UInt8]
  /// RFC 2253 one-line issuer, for people.
  public let issuer: String
  public let thisUpdate: Date
  public let nextUpdate: Date?
  /// The CRLNumber, in hexadecimal.
  public let number: String?
  public let entryCount: Int
  /// Why the CRL cannot be used at all (no CRLNumber, a critical one, a
  /// delta CRL, an unknown critical extension, a scope we do not handle), nil when none.
  public let defect: String?
  /// The issuing distribution point's names: when it names a point, the
  /// CRL covers only certificates whose distribution points give one of
  /// them (RFC 5280 §6.3.3 (b)(2)(i)); a sharded CRL covers its shard only.
  /// nil: no point named, it covers every certificate of its issuer. Empty:
  /// a point named in a way not matched here (a relative name), so it
  /// covers none.
  let scopeNames: Set<String>?
  let onlyUserCertificates: Bool
  let onlyCACertificates: Bool
  /// An indirect CRL (issuing distribution point indirectCRL): its issuer is
  /// a CRL issuer that certificates name in their distribution points, and
  /// its entries may name another certificate issuer (RFC 5280 §5.3.3).
  public let isIndirect: Bool
  /// Certificates that followed the CRL in its PEM file: where the
  /// certificate of an indirect CRL's issuer may come with it.
  let bundled: [X509Certificate]
  /// Issuers' certificate digests this CRL was checked against, and the result.
  private let checked = Locked<[Digest256: String?]>([:])
  private let verifiedBy = Locked<X509Certificate?>(nil)

  /// The issuer the CRL last verified under: a refreshed CRL must verify under it too.
  public var verifiedIssuer: X509Certificate? { verifiedBy.withLock { $0 } }

  public static let maximumBytes = 32 << 20
  static let maximumCheckedIssuers = 64

  public init(bytes: [UInt8]) throws(CertificateParseError) {
    OpenSSLErrorQueue.clear()
    var bundled: [X509Certificate] = []
    let parsed: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
      if Self.isPEM(bytes) {
        bundled = (try? CertificateFile.parsePEM(bytes)) ?? []
        guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
        defer { BIO_free(bio) }
        return PEM_read_bio_X509_CRL(bio, nil, nil, nil)
      }
      return X509Certificate.decodeExactly(bytes, { d2i_X509_CRL(nil, $0, $1) }, free: X509_CRL_free)
    }
    guard let parsed else {
      throw CertificateParseError(detail: "not a CRL (DER or PEM X509 CRL): \(OpenSSLErrorQueue.drain())")
    }
    pointer = parsed
    der = X509Certificate.encode { i2d_X509_CRL(parsed, $0) }
    let name = X509_CRL_get_issuer(parsed)
    issuerName = X509Certificate.encode { i2d_X509_NAME(name, $0) }
    issuer = X509Certificate.oneLine(name)
    thisUpdate = X509Certificate.date(X509_CRL_get0_lastUpdate(parsed))
    nextUpdate = X509_CRL_get0_nextUpdate(parsed).map { X509Certificate.date($0) }
    entryCount = Int(pp_sk_X509_REVOKED_num(X509_CRL_get_REVOKED(parsed)))

    var defects: [String] = []
    var number: String?
    let numberIndex = X509_CRL_get_ext_by_NID(parsed, NID_crl_number, -1)
    if numberIndex < 0 {
      defects.append("it has no CRLNumber (RFC 5280 §5.2.3 requires one)")
    } else if let extensionValue = X509_CRL_get_ext(parsed, numberIndex) {
      if X509_EXTENSION_get_critical(extensionValue) != 0 {
        defects.append("its CRLNumber is marked critical (RFC 5280 §5.2.3: non-critical)")
      }
      if let value = X509_CRL_get_ext_d2i(parsed, NID_crl_number, nil, nil) {
        let integer = OpaquePointer(value)
        if let hex = i2s_ASN1_INTEGER(nil, UnsafeMutablePointer(integer)) {
          number = String(cString: hex)
          pp_OPENSSL_free(hex)
        }
        ASN1_INTEGER_free(UnsafeMutablePointer(integer))
      } else {
        defects.append("its CRLNumber does not decode")
      }
    }
    if nextUpdate == nil { defects.append("it has no nextUpdate") }
    for index in 0..<X509_CRL_get_ext_count(parsed) {
      guard let extensionValue = X509_CRL_get_ext(parsed, index) else { continue }
      let nid = OBJ_obj2nid(X509_EXTENSION_get_object(extensionValue))
      if nid == NID_delta_crl {
        defects.append("it is a delta CRL, which lists only changes")
      } else if X509_EXTENSION_get_critical(extensionValue) != 0
        && ![NID_crl_number, NID_issuing_distribution_point, NID_authority_key_identifier].contains(nid)
      {
        defects.append("it has an unknown critical extension")
      }
    }
    var names: OpaquePointer?
    var onlyUser: Int32 = 0
    var onlyCA: Int32 = 0
    var someReasons: Int32 = 0
    var indirect: Int32 = 0
    var onlyAttributes: Int32 = 0
    var relative: Int32 = 0
    var scope: Set<String>?
    switch pp_X509_CRL_issuing_point(
      parsed, &names, &relative, &onlyUser, &onlyCA, &someReasons, &indirect, &onlyAttributes)
    {
    case -1: defects.append("its issuing distribution point does not decode")
    case 1:
      if someReasons != 0 { defects.append("it covers only some revocation reasons") }
      if onlyAttributes != 0 { defects.append("it covers attribute certificates only") }
      if relative != 0 { scope = [] }
      if let names {
        scope = Set(
          RevocationPointers.uris(in: names).map { "uri:" + $0 }
            + RevocationPointers.directoryNames(in: names).map(RevocationPointers.directoryTag))
        pp_GENERAL_NAMES_free(names)
      }
    default: break
    }
    if Self.hasUnknownCriticalEntryExtension(parsed) {
      defects.append("an entry has an unknown critical extension (RFC 5280 §5.3)")
    }
    // OpenSSL sorts the entries on the first lookup: done here, where the
    // CRL is read (off the event loops), not during a handshake.
    if let zero = ASN1_INTEGER_new() {
      var ignored: OpaquePointer?
      _ = X509_CRL_get0_by_serial(parsed, &ignored, zero)
      ASN1_INTEGER_free(zero)
    }
    scopeNames = scope
    onlyUserCertificates = onlyUser != 0
    onlyCACertificates = onlyCA != 0
    isIndirect = indirect != 0
    self.bundled = bundled
    self.number = number
    defect = defects.isEmpty ? nil : defects.joined(separator: "; ")
    OpenSSLErrorQueue.clear()
  }

  deinit { X509_CRL_free(pointer) }

  static func hasUnknownCriticalEntryExtension(_ crl: OpaquePointer) -> Bool {
    let known = [NID_crl_reason, NID_invalidity_date, NID_certificate_issuer, NID_hold_instruction_code]
    guard let entries = X509_CRL_get_REVOKED(crl) else { return false }
    for index in 0..<pp_sk_X509_REVOKED_num(entries) {
      guard let entry = pp_sk_X509_REVOKED_value(entries, index) else { continue }
      for position in 0..<X509_REVOKED_get_ext_count(entry) {
        guard let value = X509_REVOKED_get_ext(entry, position) else { continue }
        if X509_EXTENSION_get_critical(value) != 0,
          !known.contains(OBJ_obj2nid(X509_EXTENSION_get_object(value)))
        {
          return true
        }
      }
    }
    return false
  }

  static func isPEM(_ bytes: [UInt8]) -> Bool {
    let marker = Array("-----BEGIN".utf8)
    return bytes.count >= marker.count
      && bytes.indices.dropLast(marker.count - 1).contains {
        bytes[$0..<$0 + marker.count].elementsEqual(marker)
      }
  }

  /// Whether the CRL's scope covers `certificate` (its issuing distribution
  /// point's names and certificate kinds); a CRL that does not cover a
  /// certificate says nothing about it.
  func covers(_ certificate: X509Certificate, pointers: RevocationPointers) -> Bool {
    let isCA = X509_check_ca(certificate.pointer) > 0
    if onlyUserCertificates && isCA { return false }
    if onlyCACertificates && !isCA { return false }
    guard let scopeNames else { return true }
    return !scopeNames.isDisjoint(with: pointers.scopeNames)
  }

  /// nil when `issuer` signed this CRL and may sign CRLs; otherwise why not.
  /// The answer is remembered per issuer key.
  public func check(signedBy issuer: X509Certificate) -> String? {
    // By certificate, not key: the answer depends on its key usage too.
    let key = SHA256.digest(issuer.der)
    if let known = checked.withLock({ $0[key] }) { return known }
    let result = verify(issuer)
    checked.withLock { checked in
      // Few keys ever share a CRL issuer's name; a chain accepted under
      // allowInvalidCertificates could bring any number, so the memo is bounded.
      if checked.count >= Self.maximumCheckedIssuers { checked.removeAll() }
      checked[key] = result
    }
    if result == nil { verifiedBy.withLock { $0 = issuer } }
    return result
  }

  private func verify(_ issuer: X509Certificate) -> String? {
    defer { OpenSSLErrorQueue.clear() }
    guard X509_NAME_cmp(X509_CRL_get_issuer(pointer), X509_get_subject_name(issuer.pointer)) == 0 else {
      return
        "it is issued by \(self.issuer), not by \(X509Certificate.oneLine(X509_get_subject_name(issuer.pointer)))"
    }
    if X509_get_extension_flags(issuer.pointer) & UInt32(EXFLAG_KUSAGE) != 0
      && X509_get_key_usage(issuer.pointer) & UInt32(KU_CRL_SIGN) == 0
    {
      return "its issuer's key usage lacks cRLSign"
    }
    guard let key = X509_get0_pubkey(issuer.pointer), X509_CRL_verify(pointer, key) == 1 else {
      return "its signature does not verify under the issuer's key"
    }
    return nil
  }

  /// The entry listing `certificate`, nil when the CRL does not list it
  /// (or lists it as removeFromCRL).
  public func entry(for certificate: X509Certificate) -> RevocationEntry? {
    var revoked: OpaquePointer?
    guard X509_CRL_get0_by_cert(pointer, &revoked, certificate.pointer) == 1, let revoked else { return nil }
    return RevocationEntry(
      time: X509Certificate.date(X509_REVOKED_get0_revocationDate(revoked)),
      reason: Self.reasonName(pp_X509_REVOKED_reason(revoked)))
  }

  /// RFC 5280 §5.3.1 CRLReason names.
  static func reasonName(_ code: Int) -> String? {
    let names = [
      0: "unspecified", 1: "keyCompromise", 2: "cACompromise", 3: "affiliationChanged", 4: "superseded",
      5: "cessationOfOperation", 6: "certificateHold", 8: "removeFromCRL", 9: "privilegeWithdrawn",
      10: "aACompromise",
    ]
    return code < 0 ? nil : names[code] ?? "reason \(code)"
  }
}
