import Foundation
import PinTLS
import PinTestSupport
import PinTrust
import XCTest

final class CertificateFileTests: XCTestCase {
  func testPEMWithSeveralCertificatesLoadsAllInOrder() throws {
    let certificates = try CertificateFile.load(Fixtures.path("httpbin-fullchain.pem")).map { $0.value() }
    XCTAssertEqual(
      certificates.map(\.commonName), ["httpbin.org", "Pinproxy Test Intermediate A", "Pinproxy Test Root A"])
  }

  func testDERAndPEMOfOneCertificateAreTheSameCertificate() throws {
    let der = try CertificateFile.load(Fixtures.path("httpbin.der")).map { $0.value() }
    let pem = try CertificateFile.load(Fixtures.path("httpbin.pem")).map { $0.value() }
    XCTAssertEqual(der.count, 1)
    XCTAssertEqual(der[0].der, pem[0].der)
  }

  func testValuesMatchWhatTheOpenSSLCommandLineReports() throws {
    let leaf = Fixtures.certificate("httpbin.pem")
    XCTAssertEqual(leaf.spkiPin, try openSSLPin(Fixtures.path("httpbin.pem")))
    XCTAssertEqual(leaf.dnsNames, ["httpbin.org", "*.httpbin.org"])
    XCTAssertEqual(leaf.ipAddresses.map(\.description), ["127.0.0.1", "::1"])
    XCTAssertEqual(leaf.notAfter, Date(timeIntervalSince1970: 2_051_222_400))  // 2035-01-01
    XCTAssertEqual(leaf.publicKey, PublicKeyDescription(algorithm: .rsa, bits: 2048))
    XCTAssertEqual(leaf.signatureAlgorithm, "sha256WithRSAEncryption")
    XCTAssertTrue(leaf.issuer.contains("CN=Pinproxy Test Intermediate A"), leaf.issuer)
    let ec = Fixtures.certificate("ecdsa.pem")
    XCTAssertEqual(ec.spkiPin, try openSSLPin(Fixtures.path("ecdsa.pem")))
  }

  func testMissingFileIsAnErrorNamingIt() {
    XCTAssertThrowsError(try CertificateFile.load("/nonexistent/pin.pem")) { error in
      XCTAssertTrue("\(error)".hasPrefix("/nonexistent/pin.pem: no such file"), "\(error)")
    }
  }

  func testGarbageAndEmptyPEMAreErrors() throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let garbage = directory.appendingPathComponent("garbage.der")
    try Data("not a certificate".utf8).write(to: garbage)
    XCTAssertThrowsError(try CertificateFile.load(garbage.path)) { error in
      XCTAssertTrue("\(error)".contains("garbage.der"), "\(error)")
    }
    let key = directory.appendingPathComponent("key-only.pem")
    try Data(contentsOf: URL(fileURLWithPath: Fixtures.path("httpbin.key"))).write(to: key)
    XCTAssertThrowsError(try CertificateFile.load(key.path)) { error in
      XCTAssertTrue("\(error)".contains("no CERTIFICATE"), "\(error)")
    }
    let damaged = directory.appendingPathComponent("damaged.pem")
    var text = try String(contentsOfFile: Fixtures.path("httpbin.pem"), encoding: .utf8)
    text = text.replacingOccurrences(of: "MII", with: "M!I")
    try Data(text.utf8).write(to: damaged)
    XCTAssertThrowsError(try CertificateFile.load(damaged.path))
  }

  /// The pin computation the README gives, run through the real openssl CLI.
  func openSSLPin(_ path: String) throws -> String {
    let script =
      "openssl x509 -in '\(path)' -pubkey -noout | openssl pkey -pubin -outform der"
      + " | openssl dgst -sha256 -binary | base64"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", script]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return "sha256/" + String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  }
}
