import COpenSSL
import Foundation
import PinTrust

/// Builds and signs X.509 v3 certificates: the local CA and the leaves it
/// mints for intercepted hosts.
enum CertificateBuilder {
  struct Failure: Error, CustomStringConvertible {
    let description: String
  }

  /// - Parameters:
  ///   - extensions: (NID, OpenSSL config value) pairs, e.g. (NID_subject_alt_name, "DNS:example.com").
  ///   - issuer: nil for a self-signed certificate.
  static func build(
    subject: [(String, String)], publicKey: PrivateKey, notBefore: Date, notAfter: Date,
    extensions: [(Int32, String)], issuer: (certificate: X509Certificate, key: PrivateKey)?,
    signingKey: PrivateKey
  ) throws(Failure) -> X509Certificate {
    OpenSSLErrorQueue.clear()
    guard let cert = X509_new() else { throw Failure(description: OpenSSLErrorQueue.drain()) }
    let certificate = X509Certificate(owning: cert)
    X509_set_version(cert, 2)
    // A random 127-bit serial: unique without a database.
    var serialBytes = [UInt8](repeating: 0, count: 16)
    guard RAND_bytes(&serialBytes, 16) == 1 else {
      throw Failure(description: "no randomness for a serial number")
    }
    serialBytes[0] &= 0x7f
    guard let serial = BN_bin2bn(serialBytes, 16, nil) else {
      throw Failure(description: OpenSSLErrorQueue.drain())
    }
    defer { BN_free(serial) }
    BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert))
    guard let name = X509_NAME_new() else { throw Failure(description: OpenSSLErrorQueue.drain()) }
    defer { X509_NAME_free(name) }
    for (field, value) in subject {
      X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8, value, -1, -1, 0)
    }
    X509_set_subject_name(cert, name)
    X509_set_issuer_name(cert, issuer.map { X509_get_subject_name($0.certificate.pointer) } ?? name)
    X509_set_pubkey(cert, publicKey.pointer)
    guard let start = ASN1_TIME_set(nil, time_t(notBefore.timeIntervalSince1970)),
      let end = ASN1_TIME_set(nil, time_t(notAfter.timeIntervalSince1970))
    else { throw Failure(description: OpenSSLErrorQueue.drain()) }
    defer {
      ASN1_TIME_free(start)
      ASN1_TIME_free(end)
    }
    X509_set1_notBefore(cert, start)
    X509_set1_notAfter(cert, end)
    var context = X509V3_CTX()
    X509V3_set_ctx(&context, issuer?.certificate.pointer ?? cert, cert, nil, nil, 0)
    for (nid, value) in extensions {
      guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
        throw Failure(description: "extension \(value): \(OpenSSLErrorQueue.drain())")
      }
      X509_add_ext(cert, ext, -1)
      X509_EXTENSION_free(ext)
    }
    guard X509_sign(cert, signingKey.pointer, EVP_sha256()) > 0 else {
      throw Failure(description: "signing failed: \(OpenSSLErrorQueue.drain())")
    }
    return certificate
  }
}
