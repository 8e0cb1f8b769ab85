/// Checks an ECDSA P-256 / SHA-256 signature (DER) over a message with the
/// list's public key: the seam between the update rules here and the
/// signature code in PinTLS, as `ChainVerifier` is for X.509.
public protocol PinSignatureVerifier: Sendable {
  func isValid(signature: [UInt8], over message: [UInt8]) -> Bool
}
