// OpenSSL exposes much of its API as macros, which Swift cannot import.
// Each shim below is a `static inline` function with the macro's meaning;
// nothing here adds behaviour of its own.
#ifndef PINPROXY_COPENSSL_SHIM_H
#define PINPROXY_COPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

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
/// The IA5String / OCTET STRING payload of a dNSName or iPAddress entry.
static inline const ASN1_STRING *pp_GENERAL_NAME_string(const GENERAL_NAME *name) {
  switch (name->type) {
  case GEN_DNS: return name->d.dNSName;
  case GEN_IPADD: return name->d.iPAddress;
  default: return NULL;
  }
}

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

static inline long pp_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
  return SSL_CTX_set_session_cache_mode(ctx, mode);
}
static inline long pp_SSL_CTX_add_extra_chain_cert(SSL_CTX *ctx, X509 *cert) {
  return SSL_CTX_add_extra_chain_cert(ctx, cert);
}
static inline long pp_SSL_set_mode(SSL *ssl, long mode) { return SSL_set_mode(ssl, mode); }
static inline long pp_BIO_ctrl_pending(BIO *bio) { return (long)BIO_ctrl_pending(bio); }
static inline int pp_BIO_set_mem_eof_return(BIO *bio, int value) { return (int)BIO_set_mem_eof_return(bio, value); }

static inline long pp_SSL_add1_chain_cert(SSL *ssl, X509 *cert) { return SSL_add1_chain_cert(ssl, cert); }
static inline const char *pp_SSL_get_servername(const SSL *ssl) {
  return SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
}

/// ALPN on the server side: choose http/1.1 when the client offers it; with
/// no overlap the handshake goes on without ALPN (old clients send none).
static int pp_alpn_select_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                                 const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  static const unsigned char supported[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char *selected = NULL;
  if (SSL_select_next_proto(&selected, outlen, supported, sizeof(supported), in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}
static inline void pp_SSL_CTX_select_http11(SSL_CTX *ctx) { SSL_CTX_set_alpn_select_cb(ctx, pp_alpn_select_http11, NULL); }

// MARK: Names

/// XN_FLAG_RFC2253 is a composite macro: RFC 2253 one-line subject/issuer printing.
static inline unsigned long pp_XN_FLAG_RFC2253(void) { return XN_FLAG_RFC2253; }

// MARK: Memory and BIO

static inline void pp_OPENSSL_free(void *pointer) { OPENSSL_free(pointer); }
static inline long pp_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }

#endif
