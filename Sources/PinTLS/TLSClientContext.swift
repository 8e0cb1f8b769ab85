import COpenSSL
import Foundation
import PinTrust

/// One upstream `SSL_CTX`, built once per domain rule and shared by all its
/// connections: protocol floor, cipher suites, ALPN and client identity.
///
/// OpenSSL's own certificate verification is deliberately off
/// (SSL_VERIFY_NONE): the trust engine decides on the peer chain after the
/// handshake and before a single byte of the request is written, so a
/// refused chain never sees application data.
///
/// Not confined to a queue: immutable after `init`; an `SSL_CTX` may make
/// `SSL` objects on several threads at once.
public final class TLSClientContext: @unchecked Sendable {
  let context: OpaquePointer
  public let minimumVersion: TLSVersion
  public let requiresForwardSecrecy: Bool

  /// ATS forward-secrecy suites for TLS 1.2 and below: ECDHE with AES-GCM,
  /// ChaCha20 or AES-CBC. TLS 1.3 suites are always forward-secret.
  static let forwardSecretCiphers = [
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
    "ECDHE-ECDSA-AES256-SHA384", "ECDHE-ECDSA-AES128-SHA256", "ECDHE-RSA-AES256-SHA384",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES256-SHA", "ECDHE-ECDSA-AES128-SHA", "ECDHE-RSA-AES256-SHA", "ECDHE-RSA-AES128-SHA",
  ].joined(separator: ":")

  /// - Parameter requestsTransparency: ask servers for SCTs (the TLS
  ///   extension and an OCSP staple), for rules that require certificate
  ///   transparency; they are counted after the handshake (`CTLogStore`).
  public init(
    minimumVersion: TLSVersion, requiresForwardSecrecy: Bool, identity: ClientIdentity? = nil,
    requestsTransparency: Bool = false
  ) throws(TLSEngine.Failure) {
    OpenSSLErrorQueue.clear()
    guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSEngine.currentFailure() }
    self.context = context
    self.minimumVersion = minimumVersion
    self.requiresForwardSecrecy = requiresForwardSecrecy
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
    _ = pp_SSL_CTX_set_min_proto_version(context, minimumVersion.openSSLValue)
    _ = pp_SSL_CTX_set_max_proto_version(context, 0)
    pp_SSL_CTX_forbid_renegotiation(context)
    var ciphers = requiresForwardSecrecy ? Self.forwardSecretCiphers : "DEFAULT"
    // Below TLS 1.2 the handshake signs with SHA-1, which OpenSSL 3 refuses
    // above security level 0; a rule that allows TLS 1.0 asks for exactly that.
    if minimumVersion < .tls12 { ciphers += ":@SECLEVEL=0" }
    guard SSL_CTX_set_cipher_list(context, ciphers) == 1 else { throw TLSEngine.currentFailure() }
    // ALPN: length-prefixed protocol names.
    let alpn: [UInt8] = [8] + Array("http/1.1".utf8)
    _ = SSL_CTX_set_alpn_protos(context, alpn, UInt32(alpn.count))
    // Sessions are kept by the caller, keyed by host, port and policy generation.
    _ = pp_SSL_CTX_set_session_cache_mode(
      context, Int(SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE))
    // Every handshake asks for a staple (status_request): a revoked staple
    // refuses whatever the rule says, and a must-staple leaf needs one.
    guard pp_SSL_CTX_request_ocsp_staple(context) == 1 else { throw TLSEngine.currentFailure() }
    if requestsTransparency {
      guard pp_SSL_CTX_request_scts(context) == 1 else { throw TLSEngine.currentFailure() }
    }
    if identity == nil {
      // An origin that asks for a certificate is sent none; the request
      // is noted (`TLSEngine.certificateRequestUnanswered`) to explain the
      // refusal that follows.
      pp_SSL_CTX_note_certificate_requests(context)
    }
    if let identity {
      guard SSL_CTX_use_certificate(context, identity.certificate.pointer) == 1,
        SSL_CTX_use_PrivateKey(context, identity.key) == 1, SSL_CTX_check_private_key(context) == 1
      else { throw TLSEngine.currentFailure() }
      for extra in identity.chain {
        X509_up_ref(extra.pointer)
        _ = pp_SSL_CTX_add_extra_chain_cert(context, extra.pointer)
      }
    }
  }

  deinit { SSL_CTX_free(context) }

  /// ALPN offering HTTP/2 first (RFC 9113 §3.2), then HTTP/1.1.
  static let http2AndHTTP11: [UInt8] = [2] + Array("h2".utf8) + [8] + Array("http/1.1".utf8)

  /// A client engine for one connection, with SNI for DNS names and the
  /// session to resume if one is given. `offeringHTTP2` puts `h2` before
  /// the context's `http/1.1` for this connection only: the daemon's own
  /// requests (pin lists, reports) speak HTTP/1.1 over the same contexts.
  public func makeEngine(serverName: TrustHost?, resuming session: TLSSession?, offeringHTTP2: Bool = false)
    throws(TLSEngine.Failure) -> TLSEngine
  {
    let engine = try TLSEngine(context: context, server: false)
    if offeringHTTP2 {
      _ = SSL_set_alpn_protos(engine.ssl, Self.http2AndHTTP11, UInt32(Self.http2AndHTTP11.count))
    }
    if case .dns(let name) = serverName { _ = pp_SSL_set_tlsext_host_name(engine.ssl, name) }
    if let session { SSL_set_session(engine.ssl, session.pointer) }
    return engine
  }
}

/// A resumable TLS session (owns one `SSL_SESSION` reference).
/// Not confined to a queue: immutable; the session cache hands it to any
/// loop, and OpenSSL reference-counts `SSL_SESSION` atomically.
public final class TLSSession: @unchecked Sendable {
  let pointer: OpaquePointer
  /// The OCSP response stapled to the full handshake the session came from:
  /// a resumed handshake carries none, and the revocation check still
  /// needs it (until its own nextUpdate) for a must-staple leaf.
  public let staple: [UInt8]?

  /// The engine's current session if it can be resumed.
  public init?(from engine: TLSEngine, staple: [UInt8]? = nil) {
    self.staple = staple
    guard let session = SSL_get1_session(engine.ssl) else { return nil }
    guard SSL_SESSION_is_resumable(session) == 1 else {
      SSL_SESSION_free(session)
      return nil
    }
    pointer = session
  }

  deinit { SSL_SESSION_free(pointer) }
}
