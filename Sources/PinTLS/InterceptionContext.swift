import COpenSSL
import Foundation
import PinTrust

/// The client-facing `SSL_CTX` of a listener that intercepts CONNECT: its
/// protocol floor and cipher string (legacy clients may need "1.0" and
/// "DEFAULT@SECLEVEL=0"), ALPN h2 (when enabled) or http/1.1. The certificate is set per
/// connection: the leaf minted for the CONNECT host.
///
/// Not confined to a queue: immutable after `init` (the `SSL_CTX` is only
/// read when each connection's `SSL` is made), so every loop shares it.
public final class InterceptionContext: @unchecked Sendable {
  let context: OpaquePointer
  public let ca: LocalCA
  /// Kept alive here: the `SSL_CTX` holds only an unretained pointer to it.
  public let clientCertificates: ClientCertificateRequirement?

  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  /// - Parameter offersHTTP2: select `h2` when the client offers it
  ///   (RFC 7301 §3.2: the server's preference), else `http/1.1`.
  /// - Parameter clientCertificates: require a client certificate (tunnel
  ///   listeners with `downstreamClientCA`).
  public init(
    ca: LocalCA, minimumVersion: TLSVersion, ciphers: String, offersHTTP2: Bool = false,
    clientCertificates: ClientCertificateRequirement? = nil
  ) throws(Failure) {
    self.clientCertificates = clientCertificates
    OpenSSLErrorQueue.clear()
    guard let context = SSL_CTX_new(TLS_server_method()) else {
      throw Failure(description: OpenSSLErrorQueue.drain())
    }
    self.context = context
    self.ca = ca
    _ = pp_SSL_CTX_set_min_proto_version(context, minimumVersion.openSSLValue)
    pp_SSL_CTX_forbid_renegotiation(context)
    var cipherString = ciphers.isEmpty ? "DEFAULT" : ciphers
    if minimumVersion < .tls12 && !cipherString.contains("@SECLEVEL") { cipherString += ":@SECLEVEL=0" }
    guard SSL_CTX_set_cipher_list(context, cipherString) == 1 else {
      throw Failure(description: "cipher string \"\(cipherString)\": \(OpenSSLErrorQueue.drain())")
    }
    pp_SSL_CTX_select_alpn(context, offersHTTP2 ? 1 : 0)
    clientCertificates?.install(on: context)
  }

  deinit { SSL_CTX_free(context) }

  /// A server engine presenting both leaves (and the CA's chain, if it has one): OpenSSL keeps one certificate
  /// per key type and picks the one the client's ciphers and signature
  /// algorithms allow. The CA chain goes with each (chain certificates
  /// attach to the certificate set last).
  public func makeEngine(presenting leaves: LeafPair) throws(TLSEngine.Failure) -> TLSEngine {
    let engine = try TLSEngine(context: context, server: true)
    if clientCertificates != nil {
      let report = ClientCertificateReport()
      engine.clientCertificateReport = report
      // The callback finds the requirement through the SSL_CTX, which the
      // SSL keeps alive; the engine keeps the Swift object alive as long.
      engine.clientCertificateRequirement = clientCertificates
      _ = SSL_set_ex_data(engine.ssl, reportSlot, Unmanaged.passUnretained(report).toOpaque())
    }
    for (leaf, key) in [(leaves.rsa, ca.rsaLeafKey), (leaves.ecdsa, ca.leafKey)] {
      guard SSL_use_certificate(engine.ssl, leaf.pointer) == 1,
        SSL_use_PrivateKey(engine.ssl, key.pointer) == 1
      else { throw TLSEngine.currentFailure() }
      for certificate in ca.chain { _ = pp_SSL_add1_chain_cert(engine.ssl, certificate.pointer) }
    }
    return engine
  }
}

extension TLSEngine {
  /// The server name the client asked for (SNI), when it sent one.
  public var requestedServerName: String? { pp_SSL_get_servername(ssl).map { String(cString: $0) } }
}
