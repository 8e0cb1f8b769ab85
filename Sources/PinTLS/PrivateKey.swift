import COpenSSL
import Foundation

/// Owns one `EVP_PKEY`.
///
/// Not confined to a queue: immutable after `init`; OpenSSL's key objects
/// are reference counted and safe to read from several threads.
public final class PrivateKey: @unchecked Sendable {
  let pointer: OpaquePointer

  init(owning pointer: OpaquePointer) { self.pointer = pointer }

  deinit { EVP_PKEY_free(pointer) }

  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  /// A fresh ECDSA P-256 key: fast to create and to sign with.
  public static func generateP256() throws(Failure) -> PrivateKey {
    try generate("EC", "a P-256 key") { EVP_PKEY_CTX_set_group_name($0, "P-256") }
  }

  /// An RSA key of `bits` (for leaves legacy clients can use: RSA key
  /// exchange and RSA signatures).
  public static func generateRSA(bits: Int = 2048) throws(Failure) -> PrivateKey {
    try generate("RSA", "an RSA key") { EVP_PKEY_CTX_set_rsa_keygen_bits($0, Int32(bits)) }
  }

  /// A key of OpenSSL's `algorithm`, with `configure` setting its parameters
  /// (returning 1 on success) between keygen init and generation.
  private static func generate(
    _ algorithm: String, _ what: String, configure: (OpaquePointer) -> Int32
  ) throws(Failure) -> PrivateKey {
    OpenSSLErrorQueue.clear()
    guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
      throw Failure(description: OpenSSLErrorQueue.drain())
    }
    defer { EVP_PKEY_CTX_free(context) }
    var key: OpaquePointer?
    guard EVP_PKEY_keygen_init(context) == 1, configure(context) == 1, EVP_PKEY_generate(context, &key) == 1,
      let key
    else { throw Failure(description: "cannot generate \(what): \(OpenSSLErrorQueue.drain())") }
    return PrivateKey(owning: key)
  }

  /// Reads a PEM private key (unencrypted).
  public static func load(_ path: String) throws(Failure) -> PrivateKey {
    let data: [UInt8]
    do {
      data = try BoundedFile.read(path, limit: 1 << 20)
    } catch {
      throw Failure(description: "\(path): \(error.description)")
    }
    OpenSSLErrorQueue.clear()
    let key: OpaquePointer? = Array(data).withUnsafeBytes { raw in
      guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
      defer { BIO_free(bio) }
      return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
    }
    guard let key else {
      throw Failure(description: "\(path): not a PEM private key (\(OpenSSLErrorQueue.drain()))")
    }
    return PrivateKey(owning: key)
  }

  public var pem: [UInt8] {
    PEMWriter.write { bio in PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) }
  }
}

enum PEMWriter {
  /// Runs `write` into a memory BIO and returns what it wrote.
  static func write(_ write: (OpaquePointer) -> Int32) -> [UInt8] {
    guard let bio = BIO_new(BIO_s_mem()) else { return [] }
    defer { BIO_free(bio) }
    guard write(bio) == 1 else { return [] }
    var data: UnsafeMutablePointer<CChar>?
    let length = pp_BIO_get_mem_data(bio, &data)
    guard length > 0, let data else { return [] }
    return Array(UnsafeRawBufferPointer(start: data, count: Int(length)))
  }
}

extension X509Certificate {
  public var pem: [UInt8] { PEMWriter.write { bio in PEM_write_bio_X509(bio, pointer) } }
}
