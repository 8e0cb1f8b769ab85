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
        // A point for only some reasons is not one whose CRL covers the
        // certificate on its own.
        guard let names = pp_DIST_POINT_full_name(points, index, &hasIssuer, &hasReasons), hasReasons == 0
        else { continue }
        crlNames += Self.uris(in: names)
        // A point naming its CRL issuer: that issuer's indirect CRL covers the certificate.
        if hasIssuer != 0, let issuers = pp_DIST_POINT_crl_issuer(points, index) {
          for entry in 0..<pp_sk_GENERAL_NAME_num(issuers) {
            guard let name = pp_sk_GENERAL_NAME_value(issuers, entry),
              let directory = pp_GENERAL_NAME_directory(name)
            else { continue }
            crlIssuers.append(X509Certificate.encode { i2d_X509_NAME(directory, $0) })
          }
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
}
