import COpenSSL
import PinTrust

/// SHA-256 through OpenSSL's EVP interface (hardware-accelerated where the CPU allows).
public enum SHA256 {
  public static func digest(_ bytes: UnsafeRawBufferPointer) -> Digest256 {
    var out = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    let ok = EVP_Digest(bytes.baseAddress, bytes.count, &out, &length, EVP_sha256(), nil)
    precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed: \(OpenSSLErrorQueue.drain())")
    return Digest256(bytes: out)!
  }

  public static func digest(_ bytes: [UInt8]) -> Digest256 { bytes.withUnsafeBytes { digest($0) } }
}
