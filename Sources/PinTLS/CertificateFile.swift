import COpenSSL
import Foundation
import PinTrust

/// Reads certificates from a PEM file (one or many) or a DER file (exactly one).
public enum CertificateFile {
  public struct LoadError: Error, CustomStringConvertible, Equatable {
    public let path: String
    public let problem: String
    public var description: String { "\(path): \(problem)" }
  }

  /// Bounds of a certificate file: Mozilla's whole root bundle is ~200 KiB
  /// and ~150 certificates.
  public static let maximumFileBytes = 4 << 20
  public static let maximumCertificates = 1000

  /// Every certificate in the file, in file order. An unreadable file, a file
  /// without a certificate, or a damaged one is an error naming the file.
  public static func load(_ path: String) throws(LoadError) -> [X509Certificate] {
    guard FileManager.default.fileExists(atPath: path) else {
      throw LoadError(path: path, problem: "no such file")
    }
    let bytes: [UInt8]
    do {
      bytes = try BoundedFile.read(path, limit: maximumFileBytes)
    } catch {
      throw LoadError(path: path, problem: error.description)
    }
    do {
      return try parse(bytes)
    } catch {
      throw LoadError(path: path, problem: error.description)
    }
  }

  /// Parses PEM (when the bytes hold a PEM header) or else one DER certificate.
  public static func parse(_ bytes: [UInt8]) throws(CertificateParseError) -> [X509Certificate] {
    let marker = Array("-----BEGIN".utf8)
    let isPEM =
      bytes.count >= marker.count
      && bytes.indices.dropLast(marker.count - 1).contains { start in
        bytes[start..<start + marker.count].elementsEqual(marker)
      }
    guard isPEM else { return [try X509Certificate(der: bytes)] }
    return try parsePEM(bytes)
  }

  static func parsePEM(_ bytes: [UInt8]) throws(CertificateParseError) -> [X509Certificate] {
    OpenSSLErrorQueue.clear()
    var certificates: [X509Certificate] = []
    let failure: String? = bytes.withUnsafeBytes { raw in
      guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return "out of memory" }
      defer { BIO_free(bio) }
      while let cert = PEM_read_bio_X509(bio, nil, nil, nil) {
        certificates.append(X509Certificate(owning: cert))
        if certificates.count > maximumCertificates { return "more than \(maximumCertificates) certificates" }
      }
      // The loop ends with "no start line" at end of input; anything else is damage.
      let code = ERR_peek_last_error()
      let atEnd = ERR_GET_REASON(code) == PEM_R_NO_START_LINE
      let detail = OpenSSLErrorQueue.drain()
      if code != 0 && !atEnd { return detail }
      return nil
    }
    if let failure { throw CertificateParseError(detail: "damaged PEM certificate: \(failure)") }
    guard !certificates.isEmpty else {
      throw CertificateParseError(detail: "no CERTIFICATE block in PEM data")
    }
    return certificates
  }
}
