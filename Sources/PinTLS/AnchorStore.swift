import COpenSSL
import Foundation
import PinTrust

/// Owns one parsed `X509_STORE`: a set of trust anchors, built once per
/// configuration and shared by every verification under it. Re-parsing a CA
/// bundle per connection is slow and lock-bound in OpenSSL 3, so nothing here
/// is ever rebuilt on the data path.
///
/// Immutable after `init`; OpenSSL locks the store internally for lookups, so
/// concurrent verifications may share it.
public final class AnchorStore: @unchecked Sendable {
  let pointer: OpaquePointer
  /// How many certificates were added explicitly (the system store not counted).
  public let explicitCount: Int
  public let includesSystem: Bool

  /// - Parameters:
  ///   - includeSystem: add OpenSSL's default verify paths (honouring
  ///     `SSL_CERT_FILE` and `SSL_CERT_DIR`).
  ///   - certificates: further anchors.
  ///   - partialChain: every anchor is a trust point even if it is not
  ///     self-signed (a pinned leaf or intermediate), X509_V_FLAG_PARTIAL_CHAIN.
  public init(includeSystem: Bool, certificates: [X509Certificate], partialChain: Bool = false)
    throws(AnchorStoreError)
  {
    guard let store = X509_STORE_new() else { throw AnchorStoreError(detail: OpenSSLErrorQueue.drain()) }
    pointer = store
    explicitCount = certificates.count
    includesSystem = includeSystem
    if includeSystem && X509_STORE_set_default_paths(store) != 1 {
      throw AnchorStoreError(detail: "cannot load the system trust store: \(OpenSSLErrorQueue.drain())")
    }
    for certificate in certificates where X509_STORE_add_cert(store, certificate.pointer) != 1 {
      // Adding the same certificate twice is harmless (two sets may share a root).
      let code = ERR_peek_last_error()
      if ERR_GET_REASON(code) != X509_R_CERT_ALREADY_IN_HASH_TABLE {
        throw AnchorStoreError(detail: OpenSSLErrorQueue.drain())
      }
      OpenSSLErrorQueue.clear()
    }
    if partialChain { X509_STORE_set_flags(store, UInt(X509_V_FLAG_PARTIAL_CHAIN)) }
  }

  deinit { X509_STORE_free(pointer) }
}

public struct AnchorStoreError: Error, CustomStringConvertible {
  public let detail: String
  public var description: String { "cannot build trust store: \(detail)" }
}
