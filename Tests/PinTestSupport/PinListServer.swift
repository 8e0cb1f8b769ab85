import Foundation

/// The dynamic pin list server and report receiver of the end-to-end tests
/// (Tests/Fixtures/pin_list_server.py): serves `listFile` (re-read on each
/// request), signs challenges with `challengeKey`, stores reports.
public final class PinListServer {
  public let port: Int
  public let directory: String
  let child: ChildProcess

  public var listFile: String { directory + "/list.json" }
  public var reportsFile: String { directory + "/reports.jsonl" }
  public var requestLog: String { directory + "/requests.log" }

  /// - Parameters:
  ///   - directory: holds the list, the reports and the request log.
  ///   - port: 0 for a free one; a restart passes the previous port.
  public init(directory: String, challengeKey: String? = nil, port: Int = 0) throws {
    self.directory = directory
    for file in [directory + "/reports.jsonl", directory + "/requests.log"]
    where !FileManager.default.fileExists(atPath: file) {
      FileManager.default.createFile(atPath: file, contents: Data())
    }
    if !FileManager.default.fileExists(atPath: directory + "/list.json") {
      FileManager.default.createFile(
        atPath: directory + "/list.json", contents: Data(#"{"fingerprints":[]}"#.utf8))
    }
    var arguments = [
      "python3", Fixtures.directory + "/pin_list_server.py", "--cert", Fixtures.path("httpbin-chain.pem"),
      "--key",
      Fixtures.path("httpbin.key"), "--list", directory + "/list.json", "--reports",
      directory + "/reports.jsonl",
      "--log", directory + "/requests.log", "--port", String(port),
    ]
    if let challengeKey { arguments += ["--challenge-key", challengeKey] }
    child = try ChildProcess("/usr/bin/env", arguments, captureStandardError: false)
    guard child.wait(for: "READY "),
      let line = child.currentOutput.split(separator: "\n").first(where: { $0.hasPrefix("READY") }),
      let bound = Int(line.split(separator: " ")[1])
    else { throw HarnessError("pin list server did not start: \(child.currentOutput)") }
    self.port = bound
  }

  public func publish(_ text: String) throws { try Data(text.utf8).write(to: URL(fileURLWithPath: listFile)) }

  /// The reports received so far, parsed.
  public var reports: [[String: Any]] {
    let text = (try? String(contentsOfFile: reportsFile, encoding: .utf8)) ?? ""
    return text.split(separator: "\n").compactMap {
      try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
    }
  }

  public var requests: [String] {
    ((try? String(contentsOfFile: requestLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
  }

  /// Polls until `condition` holds or `timeout` passes.
  public static func eventually(timeout: Double = 15, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
      if condition() { return true }
      usleep(50_000)
    }
    return condition()
  }

  public func stop() { child.stop() }
}

/// Leaves minted at test time by the openssl command line, under the test
/// intermediate `int-a` (a certificate rotation needs a second leaf for the
/// same name).
public enum LeafMint {
  /// Writes `NAME.pem`, `NAME-chain.pem` (leaf and int-a) and `NAME.key` in `directory`.
  /// - Parameters:
  ///   - issuer: the issuing CA's certificate and key files (int-a by default).
  ///   - extensions: more `openssl x509 -extfile` lines (a CRL distribution point …).
  public static func mint(
    commonName: String, sans: [String], name: String, in directory: String,
    issuer: (certificate: String, key: String) = (Fixtures.path("int-a.pem"), Fixtures.path("int-a.key")),
    extensions more: [String] = []
  ) throws {
    let base = directory + "/" + name
    let extensions =
      ([
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=serverAuth",
        "subjectAltName=\(sans.map { "DNS:\($0)" }.joined(separator: ","))",
        "subjectKeyIdentifier=hash",
        "authorityKeyIdentifier=keyid",
      ] + more).joined(separator: "\n")
    try Data(extensions.utf8).write(to: URL(fileURLWithPath: base + ".ext"))
    for arguments in [
      [
        "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", base + ".key", "-subj",
        "/CN=\(commonName)",
        "-out", base + ".csr",
      ],
      [
        "x509", "-req", "-in", base + ".csr", "-CA", issuer.certificate, "-CAkey", issuer.key,
        "-set_serial", String(UInt32.random(in: 1000...UInt32.max)), "-days", "90", "-sha256", "-extfile",
        base + ".ext", "-out", base + ".pem",
      ],
    ] {
      let result = try Subprocess.run("/usr/bin/env", ["openssl"] + arguments)
      guard result.status == 0 else { throw HarnessError("openssl \(arguments[0]) failed: \(result.stderr)") }
    }
    let chain =
      try String(contentsOfFile: base + ".pem", encoding: .utf8)
      + String(contentsOfFile: issuer.certificate, encoding: .utf8)
    try Data(chain.utf8).write(to: URL(fileURLWithPath: base + "-chain.pem"))
  }
}
