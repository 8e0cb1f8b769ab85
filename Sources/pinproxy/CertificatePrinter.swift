import Foundation
import PinTrust

/// The human-readable form `pinproxy pin` prints for each certificate.
enum CertificatePrinter {
  static func describe(_ certificate: Certificate, index: Int) -> String {
    let formatter = ISO8601DateFormatter()
    let names = certificate.dnsNames + certificate.ipAddresses.map(\.description)
    var lines = [
      "[\(index)] subject:  \(certificate.subject)",
      "    issuer:   \(certificate.issuer)",
      "    notAfter: \(formatter.string(from: certificate.notAfter))",
      "    key:      \(certificate.publicKey)",
    ]
    if !names.isEmpty { lines.append("    names:    \(names.joined(separator: ", "))") }
    lines += [
      "    pin:      \(certificate.spkiPin)",
      "    sha256:   \(certificate.fingerprint.hex)",
      "    sha256/base64: \(certificate.fingerprint.base64)",
    ]
    return lines.joined(separator: "\n")
  }
}
