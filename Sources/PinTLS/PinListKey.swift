import COpenSSL
import PinTrust

/// The public half of a pin list's signing key, as a config names it: base64
/// of the 65-byte uncompressed P-256 point `04‖X‖Y` (the Wultra format). It
/// verifies ECDSA P-256 / SHA-256 signatures in DER.
///
/// Not confined to a queue: immutable after `init`; verification only reads the key.
public final class PinListPublicKey: PinSignatureVerifier, @unchecked Sendable {
  let pointer: OpaquePointer

  /// A P-256 SubjectPublicKeyInfo up to its key bits: SEQUENCE { SEQUENCE {
  /// id-ecPublicKey, prime256v1 }, BIT STRING (65 bytes follow) }.
  static let spkiHeader: [UInt8] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86,
    0x48,
    0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
  ]

  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  public init(base64 text: String) throws(Failure) {
    guard let point = Base64.decode(text), point.count == 65, point[0] == 0x04 else {
      throw Failure(
        description: "publicKey must be base64 of a 65-byte uncompressed P-256 point (it starts with \"B\")")
    }
    OpenSSLErrorQueue.clear()
    let der = PinListPublicKey.spkiHeader + point
    let key: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
      var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
      return d2i_PUBKEY(nil, &cursor, buffer.count)
    }
    // Decoding checks that the point lies on the curve.
    guard let key else {
      throw Failure(description: "publicKey is not a point on P-256 (\(OpenSSLErrorQueue.drain()))")
    }
    pointer = key
  }

  deinit { EVP_PKEY_free(pointer) }

  public func isValid(signature: [UInt8], over message: [UInt8]) -> Bool {
    guard let context = EVP_MD_CTX_new() else { return false }
    defer {
      EVP_MD_CTX_free(context)
      OpenSSLErrorQueue.clear()
    }
    guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { return false }
    return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
  }
}

extension PrivateKey {
  /// An ECDSA signature (DER) with SHA-256 over `message`: what a pin list
  /// entry or a challenge response carries.
  public func signSHA256(_ message: [UInt8]) throws(Failure) -> [UInt8] {
    OpenSSLErrorQueue.clear()
    guard let context = EVP_MD_CTX_new() else { throw Failure(description: "out of memory") }
    defer { EVP_MD_CTX_free(context) }
    var length = 0
    guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1,
      EVP_DigestSign(context, nil, &length, message, message.count) == 1
    else { throw Failure(description: "cannot sign: \(OpenSSLErrorQueue.drain())") }
    var signature = [UInt8](repeating: 0, count: length)
    guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else {
      throw Failure(description: "cannot sign: \(OpenSSLErrorQueue.drain())")
    }
    return Array(signature.prefix(length))
  }

  /// For a P-256 key, the `publicKey` value a config names: base64 of the
  /// uncompressed point. nil for any other kind of key.
  public var pinListPublicKey: String? {
    var out: UnsafeMutablePointer<UInt8>?
    let length = i2d_PUBKEY(pointer, &out)
    guard length > 0, let out else { return nil }
    defer { pp_OPENSSL_free(out) }
    let der = Array(UnsafeBufferPointer(start: out, count: Int(length)))
    guard der.count == 91, Array(der.prefix(26)) == PinListPublicKey.spkiHeader else { return nil }
    return Base64.encode(Array(der.suffix(65)))
  }

  /// The public key as PEM (SubjectPublicKeyInfo).
  public var publicKeyPEM: [UInt8] { PEMWriter.write { bio in PEM_write_bio_PUBKEY(bio, pointer) } }
}
