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
  /// When a non-self-signed anchor may end a chain.
  public let partialChain: PartialChain

  /// X509_V_FLAG_PARTIAL_CHAIN, and when it applies.
  public enum PartialChain: Sendable {
    /// A chain must reach a self-signed root in the store.
    case never
    /// Every anchor is a trust point even when it is not self-signed (a
    /// pinned leaf or intermediate ends the chain where it appears).
    case always
    /// First as `never`, so a chain reaches the root whenever the store has
    /// it (a public-key pin on that root still sees it); only a chain that
    /// reaches no root is tried again as `always` (a sub-CA anchor).
    case whenNoRoot
  }

  /// - Parameters:
  ///   - includeSystem: add OpenSSL's default verify paths (honouring
  ///     `SSL_CERT_FILE` and `SSL_CERT_DIR`).
  ///   - certificates: further anchors.
  ///   - partialChain: whether an anchor that is not self-signed ends a chain.
  public init(includeSystem: Bool, certificates: [X509Certificate], partialChain: PartialChain = .never)
    throws(AnchorStoreError)
  {
    guard let store = X509_STORE_new() else { throw AnchorStoreError(detail: OpenSSLErrorQueue.drain()) }
    pointer = store
    explicitCount = certificates.count
    includesSystem = includeSystem
    self.partialChain = partialChain
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
    if partialChain == .always { X509_STORE_set_flags(store, UInt(X509_V_FLAG_PARTIAL_CHAIN)) }
  }

  deinit { X509_STORE_free(pointer) }
}

public struct AnchorStoreError: Error, CustomStringConvertible {
  public let detail: String
  public var description: String { "cannot build trust store: \(detail)" }
}
