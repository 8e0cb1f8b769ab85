// OpenSSL exposes much of its API as macros, which Swift cannot import.
// Each shim below is a `static inline` function with the macro's meaning;
// nothing here adds behaviour of its own.
#ifndef PINPROXY_COPENSSL_SHIM_H
#define PINPROXY_COPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/ct.h>
#include <openssl/err.h>
#include <openssl/ocsp.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <string.h>

// MARK: STACK_OF(X509)

static inline STACK_OF(X509) *pp_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int pp_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
static inline X509 *pp_sk_X509_value(const STACK_OF(X509) *stack, int index) {
  return sk_X509_value(stack, index);
}
static inline int pp_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
/// Frees the stack and drops one reference on every certificate in it.
static inline void pp_sk_X509_pop_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }
/// Frees the stack only; the certificates stay owned by someone else.
static inline void pp_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }

// MARK: GENERAL_NAMES (subjectAltName)

static inline int pp_sk_GENERAL_NAME_num(const GENERAL_NAMES *names) { return sk_GENERAL_NAME_num(names); }
static inline const GENERAL_NAME *pp_sk_GENERAL_NAME_value(const GENERAL_NAMES *names, int index) {
  return sk_GENERAL_NAME_value(names, index);
}
static inline void pp_GENERAL_NAMES_free(GENERAL_NAMES *names) { GENERAL_NAMES_free(names); }
static inline GENERAL_NAMES *pp_X509_subject_alt_names(const X509 *cert) {
  return (GENERAL_NAMES *)X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
}
static inline int pp_GENERAL_NAME_type(const GENERAL_NAME *name) { return name->type; }
/// The IA5String / OCTET STRING payload of a dNSName, iPAddress or URI entry.
static inline const ASN1_STRING *pp_GENERAL_NAME_string(const GENERAL_NAME *name) {
  switch (name->type) {
  case GEN_DNS: return name->d.dNSName;
  case GEN_IPADD: return name->d.iPAddress;
  case GEN_URI: return name->d.uniformResourceIdentifier;
  default: return NULL;
  }
}

// MARK: Certificate profile facts

static inline NAME_CONSTRAINTS *pp_X509_name_constraints(const X509 *cert, int *critical) {
  return (NAME_CONSTRAINTS *)X509_get_ext_d2i(cert, NID_name_constraints, critical, NULL);
}
static inline void pp_NAME_CONSTRAINTS_free(NAME_CONSTRAINTS *constraints) { NAME_CONSTRAINTS_free(constraints); }
/// The permitted (excluded = 0) or excluded (excluded = 1) subtrees; NULL when absent.
static inline STACK_OF(GENERAL_SUBTREE) *pp_NAME_CONSTRAINTS_subtrees(const NAME_CONSTRAINTS *constraints,
                                                                     int excluded) {
  return excluded ? constraints->excludedSubtrees : constraints->permittedSubtrees;
}
static inline int pp_sk_GENERAL_SUBTREE_num(const STACK_OF(GENERAL_SUBTREE) *stack) {
  return sk_GENERAL_SUBTREE_num(stack);
}
static inline const GENERAL_NAME *pp_sk_GENERAL_SUBTREE_base(const STACK_OF(GENERAL_SUBTREE) *stack, int index) {
  return sk_GENERAL_SUBTREE_value(stack, index)->base;
}

/// Decodes an extension's value with OpenSSL's own template for its type.
/// Returns -1 when OpenSSL has no template for the type, 0 when the bytes do
/// not decode or leave bytes over, 1 when they decode; with `reencode`, 1
/// also requires that encoding the decoded value gives back the same bytes
/// (the value was DER, not merely BER).
static inline int pp_X509_EXTENSION_decodes(X509_EXTENSION *extension, int reencode) {
  const X509V3_EXT_METHOD *method = X509V3_EXT_get(extension);
  if (method == NULL || method->it == NULL) return -1;
  const ASN1_OCTET_STRING *data = X509_EXTENSION_get_data(extension);
  const unsigned char *start = ASN1_STRING_get0_data(data);
  long length = ASN1_STRING_length(data);
  const unsigned char *cursor = start;
  ASN1_VALUE *value = ASN1_item_d2i(NULL, &cursor, length, ASN1_ITEM_ptr(method->it));
  if (value == NULL) return 0;
  int result = cursor == start + length;
  if (result && reencode) {
    unsigned char *encoded = NULL;
    int encodedLength = ASN1_item_i2d(value, &encoded, ASN1_ITEM_ptr(method->it));
    result = encodedLength == length && memcmp(encoded, start, (size_t)length) == 0;
    OPENSSL_free(encoded);
  }
  ASN1_item_free(value, ASN1_ITEM_ptr(method->it));
  return result;
}

/// A verify callback that lets a path through when its only faults are
/// validity dates: the caller checks dates itself (RFC 5280 §4.1.2.5 makes
/// notAfter inclusive, and OpenSSL does not). Every other error still fails.
static int pp_verify_ignoring_dates(int ok, X509_STORE_CTX *context) {
  if (ok) return ok;
  int error = X509_STORE_CTX_get_error(context);
  return error == X509_V_ERR_CERT_HAS_EXPIRED || error == X509_V_ERR_CERT_NOT_YET_VALID;
}
static inline void pp_X509_STORE_CTX_ignore_validity_dates(X509_STORE_CTX *context) {
  X509_STORE_CTX_set_verify_cb(context, pp_verify_ignoring_dates);
}

// MARK: Client certificates (tunnel listeners with downstreamClientCA)

/// Slots for the listener's requirement (on the SSL_CTX) and each
/// connection's report (on the SSL), read by the verify callback.
static inline int pp_SSL_CTX_new_ex_index(void) { return SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL); }
static inline int pp_SSL_new_ex_index(void) { return SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL); }

// MARK: SSL / SSL_CTX control macros

static inline long pp_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
  return SSL_set_tlsext_host_name(ssl, name);
}
static inline long pp_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
  return SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long pp_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int version) {
  return SSL_CTX_set_max_proto_version(ctx, version);
}
static inline long pp_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
// Renegotiation off both ways (TLS <= 1.2): a peer could otherwise force a
// full handshake on the event loop as often as it likes, and present
// certificates after the trust decision was made.
static inline void pp_SSL_CTX_forbid_renegotiation(SSL_CTX *ctx) {
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
}

static inline long pp_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
  return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline long pp_SSL_CTX_add_extra_chain_cert(SSL_CTX *ctx, X509 *cert) {
  return SSL_CTX_add_extra_chain_cert(ctx, cert);
}
static inline long pp_SSL_set_mode(SSL *ssl, long mode) { return SSL_set_mode(ssl, mode); }
// The retry flags a custom BIO (PinTLS's TLSTransport) sets and clears:
// "no bytes yet" must read as retry, never as end of file.
static inline void pp_BIO_set_retry_read(BIO *bio) { BIO_set_retry_read(bio); }
static inline void pp_BIO_clear_retry_flags(BIO *bio) { BIO_clear_retry_flags(bio); }

static inline long pp_SSL_add1_chain_cert(SSL *ssl, X509 *cert) { return SSL_add1_chain_cert(ssl, cert); }
static inline const char *pp_SSL_get_servername(const SSL *ssl) {
  return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
}

/// ALPN on the server side: h2 first when enabled (`arg` non-NULL), then
/// http/1.1, whichever the client offers; with no overlap the handshake goes
/// on without ALPN (old clients send none).
static int pp_alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                          const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  static const unsigned char both[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  const unsigned char *supported = arg ? both : both + 3;
  unsigned int length = arg ? sizeof(both) : sizeof(both) - 3;
  unsigned char *selected = NULL;
  if (SSL_select_next_proto(&selected, outlen, supported, length, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}
static inline void pp_SSL_CTX_select_alpn(SSL_CTX *ctx, int offer_h2) {
  SSL_CTX_set_alpn_select_cb(ctx, pp_alpn_select, offer_h2 ? (void *)1 : NULL);
}

// MARK: Certificate transparency (RFC 6962)

static inline int pp_sk_SCT_num(const STACK_OF(SCT) *stack) { return sk_SCT_num(stack); }
static inline SCT *pp_sk_SCT_value(const STACK_OF(SCT) *stack, int index) { return sk_SCT_value(stack, index); }
static inline STACK_OF(SCT) *pp_X509_embedded_scts(X509 *cert) {
  return (STACK_OF(SCT) *)X509_get_ext_d2i(cert, NID_ct_precert_scts, NULL, NULL);
}
/// The CT callback only makes OpenSSL ask for SCTs (the TLS extension and,
/// with the status request, the OCSP staple); the proxy counts them after the
/// handshake against its own policy, so the callback itself accepts.
static int pp_ct_collect_only(const CT_POLICY_EVAL_CTX *ctx, const STACK_OF(SCT) *scts, void *arg) {
  (void)ctx;
  (void)scts;
  (void)arg;
  return 1;
}
static inline int pp_SSL_CTX_request_scts(SSL_CTX *ctx) {
  if (SSL_CTX_set_tlsext_status_type(ctx, TLSEXT_STATUSTYPE_ocsp) != 1) return 0;
  return SSL_CTX_set_ct_validation_callback(ctx, pp_ct_collect_only, NULL);
}


// MARK: Revocation (CRLs, OCSP, stapling, must-staple)

/// A certificate's CRL distribution points (RFC 5280 §4.2.1.13), NULL
/// without the extension; freed with `pp_CRL_DIST_POINTS_free`.
static inline STACK_OF(DIST_POINT) *pp_X509_crl_distribution_points(const X509 *cert) {
  return (STACK_OF(DIST_POINT) *)X509_get_ext_d2i(cert, NID_crl_distribution_points, NULL, NULL);
}
static inline void pp_CRL_DIST_POINTS_free(STACK_OF(DIST_POINT) *points) { CRL_DIST_POINTS_free(points); }
static inline int pp_sk_DIST_POINT_num(const STACK_OF(DIST_POINT) *points) { return sk_DIST_POINT_num(points); }
/// The full name of point `index` (NULL for a relative name or none), and
/// whether it names a CRL issuer of its own (an indirect CRL) or only some reasons.
static inline const GENERAL_NAMES *pp_DIST_POINT_full_name(const STACK_OF(DIST_POINT) *points, int index,
                                                           int *hasCRLIssuer, int *hasReasons) {
  const DIST_POINT *point = sk_DIST_POINT_value(points, index);
  *hasCRLIssuer = point->CRLissuer != NULL;
  *hasReasons = point->reasons != NULL;
  if (point->distpoint == NULL || point->distpoint->type != 0) return NULL;
  return point->distpoint->name.fullname;
}

/// The CRL issuer point `index` names (an indirect CRL), NULL for none.
static inline const GENERAL_NAMES *pp_DIST_POINT_crl_issuer(const STACK_OF(DIST_POINT) *points, int index) {
  return sk_DIST_POINT_value(points, index)->CRLissuer;
}
/// The directoryName of a GENERAL_NAME, NULL for any other kind.
static inline const X509_NAME *pp_GENERAL_NAME_directory(const GENERAL_NAME *name) {
  return name->type == GEN_DIRNAME ? name->d.directoryName : NULL;
}

/// The OCSP responder URLs of a certificate's Authority Information Access.
static inline int pp_sk_OPENSSL_STRING_num(const STACK_OF(OPENSSL_STRING) *stack) {
  return sk_OPENSSL_STRING_num(stack);
}
static inline const char *pp_sk_OPENSSL_STRING_value(const STACK_OF(OPENSSL_STRING) *stack, int index) {
  return sk_OPENSSL_STRING_value(stack, index);
}

/// 1 when the certificate's TLS Feature extension (RFC 7633) lists
/// status_request (5); 0 when it does not or has none; -1 when it does not decode.
static inline int pp_X509_must_staple(const X509 *cert) {
  int critical = -1;
  TLS_FEATURE *features = (TLS_FEATURE *)X509_get_ext_d2i(cert, NID_tlsfeature, &critical, NULL);
  if (features == NULL) return critical == -1 ? 0 : -1;
  int found = 0;
  for (int index = 0; index < sk_ASN1_INTEGER_num(features); index++) {
    if (ASN1_INTEGER_get(sk_ASN1_INTEGER_value(features, index)) == 5) found = 1;
  }
  TLS_FEATURE_free(features);
  return found;
}

/// The issuing distribution point of a CRL (RFC 5280 §5.2.5): its scope.
/// Returns 0 without one, -1 when it does not decode, 1 with one, and then
/// its full names (to free with GENERAL_NAMES_free, may be NULL) and flags.
static inline int pp_X509_CRL_issuing_point(const X509_CRL *crl, GENERAL_NAMES **names, int *relative,
                                            int *onlyUser, int *onlyCA, int *onlySomeReasons, int *indirect,
                                            int *onlyAttr) {
  int critical = -1;
  ISSUING_DIST_POINT *point = (ISSUING_DIST_POINT *)X509_CRL_get_ext_d2i(
      crl, NID_issuing_distribution_point, &critical, NULL);
  *names = NULL;
  if (point == NULL) return critical == -1 ? 0 : -1;
  *onlyUser = point->onlyuser > 0;
  *onlyCA = point->onlyCA > 0;
  *onlySomeReasons = point->onlysomereasons != NULL;
  *indirect = point->indirectCRL > 0;
  *onlyAttr = point->onlyattr > 0;
  *relative = point->distpoint != NULL && point->distpoint->type == 1;
  if (point->distpoint != NULL && point->distpoint->type == 0) {
    *names = point->distpoint->name.fullname;
    point->distpoint->name.fullname = NULL;
  }
  ISSUING_DIST_POINT_free(point);
  return 1;
}

static inline X509_REVOKED *pp_sk_X509_REVOKED_value(const STACK_OF(X509_REVOKED) *stack, int index) {
  return sk_X509_REVOKED_value(stack, index);
}

/// The reason code of a revoked entry (RFC 5280 §5.3.1), -1 without one.
static inline long pp_X509_REVOKED_reason(const X509_REVOKED *entry) {
  ASN1_ENUMERATED *reason = (ASN1_ENUMERATED *)X509_REVOKED_get_ext_d2i(entry, NID_crl_reason, NULL, NULL);
  if (reason == NULL) return -1;
  long value = ASN1_ENUMERATED_get(reason);
  ASN1_ENUMERATED_free(reason);
  return value;
}

static inline int pp_sk_X509_REVOKED_num(const STACK_OF(X509_REVOKED) *stack) {
  return stack == NULL ? 0 : sk_X509_REVOKED_num(stack);
}

/// The OCSP response a server stapled to this handshake (DER), or 0 bytes.
static inline long pp_SSL_get_ocsp_staple(SSL *ssl, const unsigned char **response) {
  unsigned char *data = NULL;
  long length = SSL_get_tlsext_status_ocsp_resp(ssl, &data);
  *response = data;
  return length;
}
static inline long pp_SSL_CTX_request_ocsp_staple(SSL_CTX *ctx) {
  return SSL_CTX_set_tlsext_status_type(ctx, TLSEXT_STATUSTYPE_ocsp);
}

// MARK: Names

/// XN_FLAG_RFC2253 is a composite macro: RFC 2253 one-line subject/issuer printing.
static inline unsigned long pp_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }

// MARK: Memory and BIO

static inline void pp_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }
static inline long pp_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

/// OpenSSL's global state kept until the process ends: no atexit clean-up
/// that a loop still freeing a certificate store could race (a SEGV in
/// CRYPTO_free_ex_data at exit). Effective only as the first OpenSSL call.
static inline int pp_openssl_init_keep_at_exit(void) {
  return OPENSSL_init_crypto(OPENSSL_INIT_NO_ATEXIT, NULL);
}

/* A client asked for a certificate it has none for (RFC 8446 §4.3.2,
   RFC 5246 §7.4.4): OpenSSL calls this only when no certificate is set,
   and it sends none (returns 0). The request is noted in the connection's
   application data slot (index 0, reserved by OpenSSL for it), so that a
   server that then refuses without an alert we could read (a reset on
   loopback discards it) is still told as a refused handshake. */
static inline int pp_note_certificate_request(SSL *ssl, X509 **certificate, EVP_PKEY **key) {
  (void)certificate;
  (void)key;
  SSL_set_ex_data(ssl, 0, (void *)1);
  return 0;
}
static inline void pp_SSL_CTX_note_certificate_requests(SSL_CTX *context) {
  SSL_CTX_set_client_cert_cb(context, pp_note_certificate_request);
}
static inline int pp_SSL_certificate_was_requested(const SSL *ssl) { return SSL_get_ex_data(ssl, 0) != NULL; }

#endif
