import COpenSSL
import Foundation
import PinTrust

/// Reads an OCSP response (RFC 6960) about one certificate: decoded,
/// matched to the certificate by CertID, its signer and signature checked.
/// The dates are returned, not judged: `RevocationCheck` judges them
/// against the evaluation's clock.
public enum OCSPResponseCheck {
  /// Responses are small; a staple or an answer larger than this is refused.
  public static let maximumBytes = 64 << 10

  /// What `der` says about `leaf`, issued by `issuer`.
  /// - Parameter time: a delegated responder's certificate must be valid then.
  public static func finding(
    _ der: [UInt8], leaf: X509Certificate, issuer: X509Certificate, origin: EvidenceOrigin, at time: Date
  ) -> RevocationFinding {
    defer { OpenSSLErrorQueue.clear() }
    guard der.count <= maximumBytes else {
      return .defective(origin, "it is larger than \(maximumBytes) bytes")
    }
    let response = decode(der)
    guard let response else { return .defective(origin, "it is not a DER OCSP response") }
    defer { OCSP_RESPONSE_free(response) }
    let status = OCSP_response_status(response)
    guard status == OCSP_RESPONSE_STATUS_SUCCESSFUL else {
      return .defective(
        origin, "the responder answered \(String(cString: OCSP_response_status_str(Int(status))))")
    }
    guard let basic = OCSP_response_get1_basic(response) else {
      return .defective(origin, "it holds no basic response")
    }
    defer { OCSP_BASICRESP_free(basic) }
    guard let single = matchingResponse(basic, leaf: leaf, issuer: issuer) else {
      return .defective(origin, "it is about another certificate (no CertID matches)")
    }
    if let problem = signerProblem(basic, issuer: issuer, at: time) { return .defective(origin, problem) }

    var reason: Int32 = -1
    var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
    var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
    var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
    let state = OCSP_single_get0_status(single, &reason, &revokedAt, &thisUpdate, &nextUpdate)
    guard let thisUpdate else { return .defective(origin, "it has no thisUpdate") }
    let verdict: RevocationFinding.Verdict
    switch state {
    case V_OCSP_CERTSTATUS_GOOD: verdict = .good
    case V_OCSP_CERTSTATUS_REVOKED:
      verdict = .revoked(
        RevocationEntry(
          time: revokedAt.map { X509Certificate.date($0) } ?? .distantPast,
          reason: CertificateRevocationList.reasonName(Int(reason))))
    case V_OCSP_CERTSTATUS_UNKNOWN: verdict = .unknown
    default: return .defective(origin, "its certificate status does not decode")
    }
    return RevocationFinding(
      origin: origin, verdict: verdict, thisUpdate: X509Certificate.date(thisUpdate),
      nextUpdate: nextUpdate.map { X509Certificate.date($0) })
  }

  private static func decode(_ der: [UInt8]) -> OpaquePointer? {
    X509Certificate.decodeExactly(der, { d2i_OCSP_RESPONSE(nil, $0, $1) }, free: OCSP_RESPONSE_free)
  }

  /// The single response whose CertID names `leaf` under `issuer`, with
  /// whichever hash the responder used.
  private static func matchingResponse(_ basic: OpaquePointer, leaf: X509Certificate, issuer: X509Certificate)
    -> OpaquePointer?
  {
    for index in 0..<OCSP_resp_count(basic) {
      guard let single = OCSP_resp_get0(basic, index), let id = OCSP_SINGLERESP_get0_id(single) else {
        continue
      }
      var algorithm: OpaquePointer?
      guard OCSP_id_get0_info(nil, &algorithm, nil, nil, id) == 1,
        let algorithm, let digest = EVP_get_digestbyname(OBJ_nid2sn(OBJ_obj2nid(algorithm))),
        let expected = OCSP_cert_to_id(digest, leaf.pointer, issuer.pointer)
      else { continue }
      defer { OCSP_CERTID_free(expected) }
      if OCSP_id_cmp(expected, id) == 0 { return single }
    }
    return nil
  }

  /// nil when the issuer signed the response, or a responder the issuer
  /// delegated to (issued and signed by it, with id-kp-OCSPSigning), and the
  /// signature verifies under the signer's key (RFC 6960 §4.2.2.2).
  private static func signerProblem(_ basic: OpaquePointer, issuer: X509Certificate, at time: Date) -> String?
  {
    guard let extra = pp_sk_X509_new_null() else { return "out of memory" }
    defer { pp_sk_X509_free(extra) }
    _ = pp_sk_X509_push(extra, issuer.pointer)
    var found: OpaquePointer?
    guard OCSP_resp_get0_signer(basic, &found, extra) == 1, let signer = found else {
      return "its signer is neither the issuer nor a certificate it includes"
    }
    if X509_cmp(signer, issuer.pointer) != 0 {
      let subject = X509Certificate.oneLine(X509_get_subject_name(signer))
      guard X509_check_issued(issuer.pointer, signer) == X509_V_OK,
        let issuerKey = X509_get0_pubkey(issuer.pointer), X509_verify(signer, issuerKey) == 1
      else { return "it is signed by \(subject), which the certificate's issuer did not issue" }
      guard X509_get_extension_flags(signer) & UInt32(EXFLAG_XKUSAGE) != 0,
        X509_get_extended_key_usage(signer) & UInt32(XKU_OCSP_SIGN) != 0
      else { return "it is signed by \(subject), which lacks id-kp-OCSPSigning" }
      let notBefore = X509Certificate.date(X509_get0_notBefore(signer))
      let notAfter = X509Certificate.date(X509_get0_notAfter(signer))
      guard notBefore <= time, time <= notAfter else {
        return
          "it is signed by \(subject), whose certificate is not valid now (\(RevocationCheck.instant(notBefore))"
          + " to \(RevocationCheck.instant(notAfter)))"
      }
    }
    // The signer is trusted by the checks above, so OpenSSL checks only the
    // signature (OCSP_NOVERIFY: no path building of its own); it finds the
    // same signer, in the same places.
    guard OCSP_basic_verify(basic, extra, nil, UInt(OCSP_NOVERIFY)) == 1 else {
      return "its signature does not verify"
    }
    return nil
  }

  /// The DER OCSPRequest for `leaf` (SHA-1 CertID, no nonce, so answers
  /// can be cached and shared) and the key its answer is cached under.
  public static func request(leaf: X509Certificate, issuer: X509Certificate) -> (
    der: [UInt8], certID: Digest256
  )? {
    defer { OpenSSLErrorQueue.clear() }
    guard let request = OCSP_REQUEST_new() else { return nil }
    defer { OCSP_REQUEST_free(request) }
    guard let id = OCSP_cert_to_id(nil, leaf.pointer, issuer.pointer) else { return nil }
    let idBytes = X509Certificate.encode { i2d_OCSP_CERTID(id, $0) }
    guard OCSP_request_add0_id(request, id) != nil else {
      OCSP_CERTID_free(id)
      return nil
    }
    let der = X509Certificate.encode { i2d_OCSP_REQUEST(request, $0) }
    guard !der.isEmpty, !idBytes.isEmpty else { return nil }
    return (der, SHA256.digest(idBytes))
  }
}
