import COpenSSL
import Foundation

/// Where a certificate says its revocation status is published, and
/// whether it demands a staple: read from the certificate once per use.
struct RevocationPointers {
  /// Every URI of the CRL distribution points' full names (scope matching).
  var crlNames: [String] = []
  /// The DER names of the CRL issuers its distribution points name
  /// (cRLIssuer): whose indirect CRLs cover it (RFC 5280 §4.2.1.13).
  var crlIssuers: [[UInt8]] = []
  /// The names an issuing distribution point is matched against (its URIs
  /// as `uri:URL`, directory names as `dir:HEX`).
  var scopeNames: Set<String> = []
  /// The `http://` ones: those a CRL is fetched from (RFC 5280 §4.2.1.13:
  /// CRLs are signed, so plain HTTP is the norm).
  var crlURLs: [String] { crlNames.filter(Self.isFetchable) }
  /// The OCSP responders of the Authority Information Access (`http://` only).
  var ocspURLs: [String] = []
  /// TLS Feature status_request (RFC 7633); a feature extension that does
  /// not decode counts as one (fail closed).
  var mustStaple = false

  init(_ certificate: X509Certificate) {
    if let points = pp_X509_crl_distribution_points(certificate.pointer) {
      for index in 0..<pp_sk_DIST_POINT_num(points) {
        var hasIssuer: Int32 = 0
        var hasReasons: Int32 = 0
        let names = pp_DIST_POINT_full_name(points, index, &hasIssuer, &hasReasons)
        // A point for only some reasons is not one whose CRL covers the
        // certificate on its own.
        guard hasReasons == 0 else { continue }
        let issuers =
          hasIssuer != 0 ? pp_DIST_POINT_crl_issuer(points, index).map(Self.directoryNames(in:)) ?? [] : []
        // A point naming its CRL issuer: that issuer's indirect CRL covers the certificate.
        crlIssuers += issuers
        if let names {
          let uris = Self.uris(in: names)
          crlNames += uris
          scopeNames.formUnion(uris.map { "uri:" + $0 })
          scopeNames.formUnion(Self.directoryNames(in: names).map(Self.directoryTag))
        } else {
          // RFC 5280 §6.3.3 (b)(2)(i): without a point name, an issuing
          // distribution point's names are matched against the CRL issuer's.
          scopeNames.formUnion(issuers.map(Self.directoryTag))
        }
      }
      pp_CRL_DIST_POINTS_free(points)
    }
    if let responders = X509_get1_ocsp(certificate.pointer) {
      for index in 0..<pp_sk_OPENSSL_STRING_num(responders) {
        guard let url = pp_sk_OPENSSL_STRING_value(responders, index) else { continue }
        let text = String(cString: url)
        if Self.isFetchable(text) { ocspURLs.append(text) }
      }
      X509_email_free(responders)
    }
    mustStaple = pp_X509_must_staple(certificate.pointer) != 0
    OpenSSLErrorQueue.clear()
  }

  static func isFetchable(_ url: String) -> Bool {
    url.utf8.count <= 2048 && url.lowercased().hasPrefix("http://")
  }

  static func uris(in names: OpaquePointer) -> [String] {
    X509Certificate.uniformResourceIdentifiers(in: names)
  }

  /// The DER directoryName entries of a GENERAL_NAMES.
  static func directoryNames(in names: OpaquePointer) -> [[UInt8]] {
    (0..<pp_sk_GENERAL_NAME_num(names)).compactMap { index in
      guard let name = pp_sk_GENERAL_NAME_value(names, index), let directory = pp_GENERAL_NAME_directory(name)
      else { return nil }
      return X509Certificate.encode { i2d_X509_NAME(directory, $0) }
    }
  }

  static func directoryTag(_ der: [UInt8]) -> String {
    "dir:" + der.map { String($0, radix: 16) }.joined(separator: ".")
  }
}
