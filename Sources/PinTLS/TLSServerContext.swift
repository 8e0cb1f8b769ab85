import COpenSSL
import Foundation
import PinTrust

/// A server-side `SSL_CTX`: certificate chain and key, protocol floor and
/// cipher string, optionally requiring client certificates from a CA.
///
/// Not confined to a queue: immutable after `init`; an `SSL_CTX` may make
/// `SSL` objects on several threads at once.
public final class TLSServerContext: @unchecked Sendable {
  let context: OpaquePointer

  public struct SetupError: Error, CustomStringConvertible {
    public let description: String
  }

  /// - Parameters:
  ///   - certificateChain: PEM file, leaf first, intermediates after it.
  ///   - privateKey: PEM private key file for the leaf.
  ///   - maximumVersion: for tests that play a legacy server.
  ///   - clientCA: when set, a client certificate issued by it is required.
  public init(
    certificateChain: String, privateKey: String, minimumVersion: TLSVersion = .tls12,
    maximumVersion: TLSVersion? = nil, ciphers: String? = nil, clientCA: String? = nil
  ) throws(SetupError) {
    OpenSSLErrorQueue.clear()
    guard let context = SSL_CTX_new(TLS_server_method()) else {
      throw SetupError(description: OpenSSLErrorQueue.drain())
    }
    self.context = context
    guard SSL_CTX_use_certificate_chain_file(context, certificateChain) == 1 else {
      throw SetupError(description: "\(certificateChain): \(OpenSSLErrorQueue.drain())")
    }
    guard SSL_CTX_use_PrivateKey_file(context, privateKey, SSL_FILETYPE_PEM) == 1,
      SSL_CTX_check_private_key(context) == 1
    else { throw SetupError(description: "\(privateKey): \(OpenSSLErrorQueue.drain())") }
    _ = pp_SSL_CTX_set_min_proto_version(context, minimumVersion.openSSLValue)
    _ = pp_SSL_CTX_set_max_proto_version(context, maximumVersion?.openSSLValue ?? 0)
    var cipherString = ciphers ?? "DEFAULT"
    if minimumVersion < .tls12 && !cipherString.contains("@SECLEVEL") { cipherString += ":@SECLEVEL=0" }
    guard SSL_CTX_set_cipher_list(context, cipherString) == 1 else {
      throw SetupError(description: "cipher string \"\(cipherString)\": \(OpenSSLErrorQueue.drain())")
    }
    if let clientCA {
      guard SSL_CTX_load_verify_locations(context, clientCA, nil) == 1 else {
        throw SetupError(description: "\(clientCA): \(OpenSSLErrorQueue.drain())")
      }
      SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nil)
    }
  }

  deinit { SSL_CTX_free(context) }

  public func makeEngine() throws(TLSEngine.Failure) -> TLSEngine {
    try TLSEngine(context: context, server: true)
  }
}
