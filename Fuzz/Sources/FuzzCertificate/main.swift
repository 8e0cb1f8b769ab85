import Foundation
import FuzzSupport
import PinTLS
import PinTrust

/// Bytes as a certificate file (PEM or DER): parse, then extract everything
/// the trust engine reads (names, SANs, key, digests, dates, the profile
/// facts: extensions decoded and re-encoded, name constraints) and run the
/// pure profile rules over it, as leaf and as anchor.
func fuzzCertificate(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
  let bytes = inputBytes(data, size)
  guard let certificates = try? CertificateFile.parse(bytes) else { return 0 }
  for certificate in certificates {
    let value = certificate.value()
    require(value.spkiPin.hasPrefix("sha256/"))
    require(!certificate.der.isEmpty)
    _ = PresentedChain([certificate.der])
    let host = value.dnsNames.first.flatMap(TrustHost.init)
    _ = ChainProfile.violation(in: [value], host: host, at: value.notBefore, checksStrength: true)
    _ = ChainProfile.violation(in: [value, value], host: host, at: value.notAfter, checksStrength: true)
  }
  return 0
}

@_cdecl("FuzzCertificate_main")
func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> CInt {
  runFuzzer(argc, argv) { data, size in fuzzCertificate(data, size) }
}

/// The same callback under libFuzzer's own name, for a debug build: there
/// SwiftPM links libFuzzer's `main`, which calls it.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt { fuzzCertificate(data, size) }
