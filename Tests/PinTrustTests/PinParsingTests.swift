import PinTrust
import XCTest

final class PinParsingTests: XCTestCase {
  let sample = "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="  // SHA-256 of the empty string

  func testParsesBothSpellingsToTheSameDigest() throws {
    let slashed = try SPKIPin.parse(sample)
    let header = try SPKIPin.parse("pin-sha256=\"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\"")
    XCTAssertEqual(slashed, header)
    XCTAssertEqual(SPKIPin.format(slashed), sample)
    XCTAssertEqual(slashed.hex.prefix(11), "E3:B0:C4:42")
  }

  func testRejectsWrongPrefixLengthAndAlphabet() {
    XCTAssertThrowsError(try SPKIPin.parse("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=")) { error in
      XCTAssertEqual(
        error as? SPKIPin.ParseError, .missingPrefix("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="))
    }
    for bad in [
      "sha256/", "sha256/AAAA", "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU",
      "sha256/47DEQpj8HBSa-_TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",
      "sha256/47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFUA",
    ] {
      XCTAssertThrowsError(try SPKIPin.parse(bad), bad)
    }
  }

  func testDigestEqualityAndRoundTrip() {
    let bytes = (0..<32).map { UInt8($0) }
    let digest = Digest256(bytes: bytes)!
    XCTAssertEqual(digest.bytes, bytes)
    XCTAssertEqual(Digest256(base64: digest.base64), digest)
    var other = bytes
    other[31] ^= 1
    XCTAssertNotEqual(Digest256(bytes: other)!, digest)
    XCTAssertNil(Digest256(bytes: [UInt8](repeating: 0, count: 31)))
  }
}
