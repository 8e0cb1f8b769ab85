import COpenSSL
import Foundation
import PinTrust

/// One `X509_verify_cert` run: builds the chain from the leaf through the
/// untrusted certificates to an anchor in `store`, and checks names,
/// signatures, basic constraints, name constraints on the leaf's names and
/// usage. Dates do not fail a path here: `ChainProfile` checks them,
/// inclusive of notAfter and to the fraction of a second. OpenSSL still gets
/// the time, because it prefers issuers valid at that time when it picks one.
enum ChainBuilder {
  static func verify(
    leaf: X509Certificate, untrusted: some Collection<X509Certificate>, store: AnchorStore,
    purpose: VerificationPurpose, at time: Date
  ) -> ChainVerification {
    let full = verify(
      leaf: leaf, untrusted: untrusted, store: store, purpose: purpose, at: time, partial: false)
    guard store.partialChain == .whenNoRoot, full.failure?.kind == .untrusted else { return full }
    let partial = verify(
      leaf: leaf, untrusted: untrusted, store: store, purpose: purpose, at: time, partial: true)
    return partial.isValid ? partial : full
  }

  private static func verify(
    leaf: X509Certificate, untrusted: some Collection<X509Certificate>, store: AnchorStore,
    purpose: VerificationPurpose, at time: Date, partial: Bool
  ) -> ChainVerification {
    OpenSSLErrorQueue.clear()
    guard let context = X509_STORE_CTX_new(), let intermediates = pp_sk_X509_new_null() else {
      return failure(.other, "out of memory", leaf: leaf)
    }
    defer {
      X509_STORE_CTX_free(context)
      pp_sk_X509_free(intermediates)  // references stay with `untrusted`
    }
    for certificate in untrusted { _ = pp_sk_X509_push(intermediates, certificate.pointer) }
    guard X509_STORE_CTX_init(context, store.pointer, leaf.pointer, intermediates) == 1 else {
      return failure(.other, OpenSSLErrorQueue.drain(), leaf: leaf)
    }
    X509_VERIFY_PARAM_set_time(
      X509_STORE_CTX_get0_param(context), time_t(time.timeIntervalSince1970.rounded(.down)))
    pp_X509_STORE_CTX_ignore_validity_dates(context)
    if partial {
      X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(context), UInt(X509_V_FLAG_PARTIAL_CHAIN))
    }
    if purpose == .serverAuthentication {
      X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_SERVER)
    }
    let verified = X509_verify_cert(context) == 1
    let built = builtChain(context) ?? [leaf]
    let values = built.map { $0.value() }
    if verified {
      return ChainVerification(builtChain: values, failure: nil, signatureLinkedCount: values.count)
    }
    let code = X509_STORE_CTX_get_error(context)
    let depth = Int(X509_STORE_CTX_get_error_depth(context))
    let detail = String(cString: X509_verify_cert_error_string(Int(code)))
    let subject = depth < values.count ? values[depth].subject : nil
    OpenSSLErrorQueue.clear()
    return ChainVerification(
      builtChain: values,
      failure: ChainFailure(kind: kind(of: code), depth: depth, subject: subject, detail: detail),
      signatureLinkedCount: signatureLinkedCount(built))
  }

  private static func builtChain(_ context: OpaquePointer) -> [X509Certificate]? {
    guard let stack = X509_STORE_CTX_get1_chain(context) else { return nil }
    defer { pp_sk_X509_pop_free(stack) }
    let count = pp_sk_X509_num(stack)
    guard count > 0 else { return nil }
    return (0..<count).compactMap { index in
      pp_sk_X509_value(stack, index).map(X509Certificate.init(retaining:))
    }
  }

  /// Counts certificates from the leaf up whose signature verifies under the
  /// next certificate's key; the leaf always counts.
  static func signatureLinkedCount(_ chain: [X509Certificate]) -> Int {
    var linked = 1
    for index in 0..<max(0, chain.count - 1) {
      guard let issuerKey = X509_get0_pubkey(chain[index + 1].pointer),
        X509_verify(chain[index].pointer, issuerKey) == 1
      else { break }
      linked = index + 2
    }
    OpenSSLErrorQueue.clear()
    return linked
  }

  static func kind(of code: Int32) -> ChainFailure.Kind {
    switch code {
    case X509_V_ERR_CERT_HAS_EXPIRED: return .expired
    case X509_V_ERR_CERT_NOT_YET_VALID: return .notYetValid
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
      X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
      X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, X509_V_ERR_CERT_UNTRUSTED, X509_V_ERR_CERT_REJECTED:
      return .untrusted
    case X509_V_ERR_CERT_SIGNATURE_FAILURE, X509_V_ERR_UNABLE_TO_DECRYPT_CERT_SIGNATURE:
      return .badSignature
    case X509_V_ERR_INVALID_PURPOSE: return .wrongPurpose
    case X509_V_ERR_INVALID_CA, X509_V_ERR_PATH_LENGTH_EXCEEDED, X509_V_ERR_KEYUSAGE_NO_CERTSIGN:
      return .invalidCA
    case X509_V_ERR_ERROR_IN_CERT_NOT_BEFORE_FIELD, X509_V_ERR_ERROR_IN_CERT_NOT_AFTER_FIELD:
      return .malformed
    // An extension OpenSSL could not decode, or one it found twice: the same
    // `malformed-certificate` the profile checks give (ChainProfile).
    case X509_V_ERR_INVALID_EXTENSION:
      return .profileViolation
    default: return .other
    }
  }

  private static func failure(_ kind: ChainFailure.Kind, _ detail: String, leaf: X509Certificate)
    -> ChainVerification
  {
    ChainVerification(
      builtChain: [leaf.value()], failure: ChainFailure(kind: kind, depth: 0, subject: nil, detail: detail),
      signatureLinkedCount: 1)
  }
}
