import COpenSSL
import Foundation

/// A client certificate and key for mutual TLS, loaded from PKCS#12.
/// The passphrase is read from a file and never kept or logged.
///
/// Not confined to a queue: immutable after `init`; OpenSSL only reads the
/// certificate and key when a context is configured.
public final class ClientIdentity: @unchecked Sendable {
  public let certificate: X509Certificate
  let key: OpaquePointer
  public let chain: [X509Certificate]

  public struct LoadError: Error, CustomStringConvertible {
    public let description: String
  }

  public init(pkcs12Path: String, passphraseFile: String) throws(LoadError) {
    let data: [UInt8]
    let passphraseData: [UInt8]
    do {
      data = try BoundedFile.read(pkcs12Path, limit: 1 << 20)
    } catch {
      throw LoadError(description: "\(pkcs12Path): \(error.description)")
    }
    do {
      passphraseData = try BoundedFile.read(passphraseFile, limit: 4096)
    } catch {
      throw LoadError(description: "\(passphraseFile): passphrase file: \(error.description)")
    }
    // One trailing newline is part of how files are written, not of the secret.
    var passphrase = String(decoding: passphraseData, as: UTF8.self)
    if passphrase.hasSuffix("\r\n") {
      passphrase.removeLast(2)
    } else if passphrase.hasSuffix("\n") {
      passphrase.removeLast()
    }
    OpenSSLErrorQueue.clear()
    let bytes = Array(data)
    let parsed: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
      var cursor = buffer.baseAddress
      return d2i_PKCS12(nil, &cursor, buffer.count)
    }
    guard let pkcs12 = parsed else {
      throw LoadError(description: "\(pkcs12Path): not a PKCS#12 file (\(OpenSSLErrorQueue.drain()))")
    }
    defer { PKCS12_free(pkcs12) }
    var key: OpaquePointer?
    var certificate: OpaquePointer?
    var extra: OpaquePointer?
    guard PKCS12_parse(pkcs12, passphrase, &key, &certificate, &extra) == 1, let key, let certificate else {
      OpenSSLErrorQueue.clear()
      throw LoadError(description: "\(pkcs12Path): cannot decrypt with the passphrase in \(passphraseFile)")
    }
    self.key = key
    self.certificate = X509Certificate(owning: certificate)
    var chain: [X509Certificate] = []
    if let extra {
      for index in 0..<pp_sk_X509_num(extra) {
        if let cert = pp_sk_X509_value(extra, index) { chain.append(X509Certificate(retaining: cert)) }
      }
      pp_sk_X509_pop_free(extra)
    }
    self.chain = chain
  }

  deinit { EVP_PKEY_free(key) }
}
