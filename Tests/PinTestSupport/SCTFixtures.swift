import Foundation
import PinTrust

/// The CT fixtures of Tests/Fixtures/make-ct-fixtures.py: single SCTs over
/// the httpbin leaf, composed here into the lists a server sends.
public enum SCTFixtures {
  public static func path(_ name: String) -> String { Fixtures.path("ct/" + name) }
  public static var logList: String { path("log-list.json") }

  /// One serialized SCT by log `name` (a, b, unknown, pending, retired-early, retired-late).
  public static func sct(_ name: String) -> [UInt8] {
    [UInt8](FileManager.default.contents(atPath: path("httpbin-\(name).sct"))!)
  }

  /// The same SCT with its last signature byte changed: the log ID is
  /// known, the signature no longer verifies.
  public static func tampered(_ name: String) -> [UInt8] {
    var bytes = sct(name)
    bytes[bytes.count - 1] ^= 0x01
    return bytes
  }

  /// A TLS-encoded `SignedCertificateTimestampList` (RFC 6962 §3.3).
  public static func list(_ scts: [[UInt8]]) -> [UInt8] {
    var body: [UInt8] = []
    for sct in scts { body += [UInt8(sct.count >> 8), UInt8(sct.count & 0xff)] + sct }
    return [UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
  }

  /// The PEM `SERVERINFOV2 FOR CT` that `openssl s_server -serverinfo`
  /// sends: the extension in the TLS 1.2 ServerHello and in the TLS 1.3
  /// Certificate entry of the leaf.
  public static func serverInfo(_ scts: [[UInt8]]) -> String {
    let list = list(scts)
    // Context: client hello, TLS 1.2 server hello, TLS 1.3 certificate
    // (SSL_EXT_CLIENT_HELLO | SSL_EXT_TLS1_2_SERVER_HELLO | SSL_EXT_TLS1_3_CERTIFICATE).
    let context: [UInt8] = [0, 0, 0x11, 0x80]
    let info = context + [0, 18, UInt8(list.count >> 8), UInt8(list.count & 0xff)] + list
    var encoded = Substring(Base64.encode(info))
    var lines: [Substring] = []
    while !encoded.isEmpty {
      lines.append(encoded.prefix(64))
      encoded = encoded.dropFirst(64)
    }
    return "-----BEGIN SERVERINFOV2 FOR CT-----\n" + lines.joined(separator: "\n")
      + "\n-----END SERVERINFOV2 FOR CT-----\n"
  }

  /// Writes `bytes` to a new file under `directory`; returns its path.
  public static func write(_ bytes: [UInt8], named name: String, in directory: String) throws -> String {
    let path = directory + "/" + name
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return path
  }
}
