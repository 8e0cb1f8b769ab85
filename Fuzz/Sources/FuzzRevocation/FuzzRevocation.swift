import Foundation
import FuzzSupport
import PinTLS
import PinTrust

/// Bytes as what an origin staples or a distribution point or responder
/// sends: decoded as a CRL (DER or PEM) and asked everything a handshake
/// asks of one (scope, entry, signature under the test intermediate), and
/// as an OCSP response judged for the test leaf. Nothing may trap; a
/// finding must name its origin, and a CRL's defect must be stable.
let fixtures = "../Tests/Fixtures/pki/revocation/"
nonisolated(unsafe) let issuer = CertificateFile.fixture(fixtures + "intermediate.pem")
nonisolated(unsafe) let leaf = CertificateFile.fixture(fixtures + "good.pem")
let instant = Date(timeIntervalSince1970: 1_780_000_000)

extension CertificateFile {
  static func fixture(_ path: String) -> X509Certificate {
    guard let certificate = try? load(path).first else {
      fatalError("fixture missing: \(path) (run from Fuzz/)")
    }
    return certificate
  }
}

func fuzzRevocation(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  if let crl = try? CertificateRevocationList(bytes: bytes) {
    let first = crl.check(signedBy: issuer)
    require(crl.check(signedBy: issuer) == first, "the memo changed the answer")
    _ = crl.entry(for: leaf)
    _ = crl.issuer
    _ = crl.number
    require(!crl.der.isEmpty)
  }
  let finding = OCSPResponseCheck.finding(bytes, leaf: leaf, issuer: issuer, origin: .staple, at: instant)
  require(finding.origin == .staple)
  return 0
}

@_cdecl("FuzzRevocation_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzRevocation(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzRevocation(data, size) }
