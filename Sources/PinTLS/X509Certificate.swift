import COpenSSL
import Foundation
import PinTrust

/// Owns one OpenSSL `X509*` (one reference, dropped in `deinit`).
///
/// Immutable after creation; OpenSSL allows concurrent reads of an X509, so
/// sharing one between threads is safe.
public final class X509Certificate: @unchecked Sendable {
  let pointer: OpaquePointer

  /// Takes ownership of one reference to `pointer`.
  init(owning pointer: OpaquePointer) { self.pointer = pointer }

  /// Adds a reference to `pointer`, which stays owned by its caller too.
  convenience init(retaining pointer: OpaquePointer) {
    X509_up_ref(pointer)
    self.init(owning: pointer)
  }

  deinit { X509_free(pointer) }

  /// Parses exactly one DER certificate; trailing bytes are an error.
  public convenience init(der: [UInt8]) throws(CertificateParseError) {
    let parsed = Self.decodeExactly(der, { d2i_X509(nil, $0, $1) }, free: X509_free)
    guard let parsed else { throw CertificateParseError(detail: OpenSSLErrorQueue.drain()) }
    self.init(owning: parsed)
  }

  /// The DER encoding.
  public var der: [UInt8] { Self.encode { i2d_X509(pointer, $0) } }

  /// The DER subject name (CRLs are found by their issuer's).
  public var subjectName: [UInt8] {
    let name = X509_get_subject_name(pointer)
    return Self.encode { i2d_X509_NAME(name, $0) }
  }

  /// The DER issuer name.
  var issuerName: [UInt8] {
    let name = X509_get_issuer_name(pointer)
    return Self.encode { i2d_X509_NAME(name, $0) }
  }

  /// The DER SubjectPublicKeyInfo, the input of an SPKI pin.
  public var subjectPublicKeyInfo: [UInt8] {
    guard let key = X509_get_X509_PUBKEY(pointer) else { return [] }
    return Self.encode { i2d_X509_PUBKEY(key, $0) }
  }

  /// Runs an OpenSSL `d2i_*` function over all of `der`: nil when it does
  /// not decode or leaves bytes over (freed with `free`).
  static func decodeExactly(
    _ der: [UInt8], _ d2i: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> OpaquePointer?,
    free: (OpaquePointer) -> Void
  ) -> OpaquePointer? {
    der.withUnsafeBufferPointer { buffer in
      var cursor = buffer.baseAddress
      guard let decoded = d2i(&cursor, buffer.count) else { return nil }
      guard cursor == buffer.baseAddress! + buffer.count else {
        free(decoded)
        return nil
      }
      return decoded
    }
  }

  /// The uniformResourceIdentifier entries of a GENERAL_NAMES.
  static func uniformResourceIdentifiers(in names: OpaquePointer) -> [String] {
    var uris: [String] = []
    for index in 0..<pp_sk_GENERAL_NAME_num(names) {
      guard let name = pp_sk_GENERAL_NAME_value(names, index), pp_GENERAL_NAME_type(name) == GEN_URI,
        let string = pp_GENERAL_NAME_string(name), let data = ASN1_STRING_get0_data(string)
      else { continue }
      uris.append(
        String(
          decoding: UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(string))), as: UTF8.self))
    }
    return uris
  }

  /// Runs an OpenSSL `i2d_*` function twice: for the length, then to fill the buffer.
  static func encode(_ i2d: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?) -> Int32) -> [UInt8] {
    let length = i2d(nil)
    guard length > 0 else { return [] }
    var out = [UInt8](repeating: 0, count: Int(length))
    out.withUnsafeMutableBufferPointer { buffer in
      var cursor = buffer.baseAddress
      _ = i2d(&cursor)
    }
    return out
  }

  /// The certificate as a PinTrust value, digests included (computed here, once).
  public func value() -> Certificate {
    let der = self.der
    let names = subjectAlternativeNames()
    return Certificate(
      der: der, fingerprint: SHA256.digest(der), spkiFingerprint: SHA256.digest(subjectPublicKeyInfo),
      subject: Self.oneLine(X509_get_subject_name(pointer)),
      issuer: Self.oneLine(X509_get_issuer_name(pointer)),
      commonName: commonName, dnsNames: names.dns, ipAddresses: names.ip,
      notBefore: Self.date(X509_get0_notBefore(pointer)), notAfter: Self.date(X509_get0_notAfter(pointer)),
      publicKey: publicKeyDescription, signatureAlgorithm: signatureAlgorithm, profile: profile)
  }

  var commonName: String? {
    guard let name = X509_get_subject_name(pointer) else { return nil }
    let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
    guard index >= 0, let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry)
    else { return nil }
    var utf8: UnsafeMutablePointer<UInt8>?
    let length = ASN1_STRING_to_UTF8(&utf8, data)
    guard length >= 0, let utf8 else { return nil }
    defer { pp_OPENSSL_free(utf8) }
    return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
  }

  func subjectAlternativeNames() -> (dns: [String], ip: [IPAddress]) {
    guard let names = pp_X509_subject_alt_names(pointer) else { return ([], []) }
    defer { pp_GENERAL_NAMES_free(names) }
    var dns: [String] = []
    var ip: [IPAddress] = []
    for index in 0..<pp_sk_GENERAL_NAME_num(names) {
      guard let name = pp_sk_GENERAL_NAME_value(names, index), let string = pp_GENERAL_NAME_string(name),
        let data = ASN1_STRING_get0_data(string)
      else { continue }
      let bytes = Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(string))))
      switch pp_GENERAL_NAME_type(name) {
      case GEN_DNS: dns.append(String(decoding: bytes, as: UTF8.self))
      case GEN_IPADD: if let address = IPAddress(bytes: bytes) { ip.append(address) }
      default: break
      }
    }
    return (dns, ip)
  }

  var publicKeyDescription: PublicKeyDescription {
    guard let key = X509_get0_pubkey(pointer) else { return PublicKeyDescription(algorithm: .other, bits: 0) }
    let algorithm: PublicKeyDescription.Algorithm
    switch EVP_PKEY_get_base_id(key) {
    case EVP_PKEY_RSA, EVP_PKEY_RSA_PSS: algorithm = .rsa
    case EVP_PKEY_EC: algorithm = .ec
    case EVP_PKEY_ED25519: algorithm = .ed25519
    case EVP_PKEY_ED448: algorithm = .ed448
    case EVP_PKEY_DSA: algorithm = .dsa
    default: algorithm = .other
    }
    return PublicKeyDescription(
      algorithm: algorithm, bits: Int(EVP_PKEY_get_bits(key)),
      curve: algorithm == .ec ? Self.curve(of: key) : nil)
  }

  /// The NIST name of a P-curve, or OpenSSL's short name of any other group.
  static func curve(of key: OpaquePointer) -> String? {
    var buffer = [CChar](repeating: 0, count: 64)
    var length = 0
    guard EVP_PKEY_get_group_name(key, &buffer, buffer.count, &length) == 1 else { return nil }
    let name = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    switch name {
    case "prime256v1", "secp256r1", "P-256": return "P-256"
    case "secp384r1", "P-384": return "P-384"
    case "secp521r1", "P-521": return "P-521"
    default: return name
    }
  }

  var signatureAlgorithm: String {
    let nid = X509_get_signature_nid(pointer)
    guard let name = OBJ_nid2ln(nid) else { return "unknown" }
    return String(cString: name)
  }

  static func oneLine(_ name: OpaquePointer?) -> String {
    guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
    defer { BIO_free(bio) }
    X509_NAME_print_ex(bio, name, 0, pp_XN_FLAG_RFC2253())
    var data: UnsafeMutablePointer<CChar>?
    let length = pp_BIO_get_mem_data(bio, &data)
    guard length > 0, let data else { return "" }
    return String(decoding: UnsafeRawBufferPointer(start: data, count: Int(length)), as: UTF8.self)
  }

  static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
    guard let time else { return .distantPast }
    var parts = tm()
    guard ASN1_TIME_to_tm(time, &parts) == 1 else { return .distantPast }
    return Date(timeIntervalSince1970: TimeInterval(timegm(&parts)))
  }
}

public struct CertificateParseError: Error, CustomStringConvertible {
  public let detail: String
  public var description: String { "not a DER certificate: \(detail)" }
}
