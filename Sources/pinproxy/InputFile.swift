import Foundation
import PinConfig
import PinTLS

/// Files named on the command line. One that is missing, unreadable or not
/// what its flag takes is a usage error (exit 2) saying
/// `FLAG FILE: what is wrong; expected what the file should hold`: never an
/// empty input that a command then turns into a verdict.
enum InputFile {
  /// What each kind of file holds, for the "expected" part of a message.
  enum Expected {
    static let certificates = "PEM with CERTIFICATE blocks, or one DER certificate"
    static let chain = "the chain as the server sends it, leaf first: \(certificates)"
    static let anchors = "trust anchors: \(certificates)"
    static let pinned = "a certificate to pin: \(certificates)"
    static let sctList =
      "SCTs as a server sends them in the TLS extension: a PEM SERVERINFO FOR CT or SERVERINFOV2 FOR CT"
      + " block (what openssl s_server -serverinfo reads), or a TLS-encoded SignedCertificateTimestampList"
    static let ctLogList =
      "a CT log list in the browser vendors' JSON (schema v3: operators, each with its logs), such as"
      + " Apple's https://valid.apple.com/ct/log_list/current_log_list.json"
    static let configuration = "a pinproxy configuration (YAML)"
    static let signingKey = "the P-256 signing key in PEM, as written by `pinproxy pins keygen`"
  }

  static func usage(_ flag: String, _ path: String, _ problem: String, expected: String) -> UsageError {
    UsageError("\(flag) \(path): \(problem); expected \(expected)")
  }

  /// Why `path` cannot be read as a file at all, or nil when it can.
  static func unreadable(_ path: String) -> String? {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
      return "no such file"
    }
    if isDirectory.boolValue { return "is a directory" }
    guard FileManager.default.isReadableFile(atPath: path) else { return "permission denied" }
    return nil
  }

  /// The file's bytes, at most `limit` of them.
  static func bytes(_ path: String, flag: String, expected: String, limit: Int = 4 << 20) throws -> [UInt8] {
    if let problem = unreadable(path) { throw usage(flag, path, problem, expected: expected) }
    do {
      return try BoundedFile.read(path, limit: limit)
    } catch {
      throw usage(flag, path, error.description, expected: expected)
    }
  }

  static func certificates(_ path: String, flag: String, expected: String) throws -> [X509Certificate] {
    let content = try bytes(path, flag: flag, expected: expected, limit: CertificateFile.maximumFileBytes)
    do {
      return try CertificateFile.load(path)
    } catch {
      throw usage(flag, path, certificateProblem(error.problem, content: content), expected: expected)
    }
  }

  /// `CertificateFile`'s problem in the terms of what the file holds: a
  /// file with no PEM block was read as DER, so OpenSSL's DER error says
  /// little about a text file or a key.
  static func certificateProblem(_ problem: String, content: [UInt8]) -> String {
    let labels = PEMLabels.of(content)
    if labels.isEmpty && problem.hasPrefix("not a DER certificate") {
      return content.isEmpty ? "the file is empty" : "neither PEM (no -----BEGIN line) nor a DER certificate"
    }
    if problem.contains("no CERTIFICATE block") {
      return "PEM with \(labels.joined(separator: ", ")) but no CERTIFICATE block"
    }
    return problem.hasPrefix("not a DER certificate: ") ? String(problem.dropFirst(23)) : problem
  }

  static func sctList(_ path: String, flag: String) throws -> [UInt8] {
    _ = try bytes(path, flag: flag, expected: Expected.sctList)
    do {
      return try SCTListFile.load(path)
    } catch {
      throw usage(flag, path, error.problem, expected: Expected.sctList)
    }
  }

  static func logStore(_ path: String, flag: String, minimumSCTs: Int) throws -> CTLogStore {
    let content = try bytes(path, flag: flag, expected: Expected.ctLogList)
    guard (try? JSONSerialization.jsonObject(with: Data(content))) != nil else {
      throw usage(flag, path, "not JSON", expected: Expected.ctLogList)
    }
    let store: CTLogStore
    do {
      store = try CTLogStore(file: path, minimumSCTs: minimumSCTs)
    } catch {
      // CTLogStore names the file itself; the message names it once.
      var problem = error.description
      for prefix in ["the CT log list \(path): ", "\(path): "] where problem.hasPrefix(prefix) {
        problem = String(problem.dropFirst(prefix.count))
      }
      throw usage(flag, path, problem, expected: Expected.ctLogList)
    }
    guard !store.list.entries.isEmpty else {
      throw usage(flag, path, "lists no log", expected: Expected.ctLogList)
    }
    return store
  }

  /// A configuration, for `--config`. A problem with the file as a whole
  /// names the flag; problems inside it name file, line and key.
  static func configuration(_ path: String, flag: String = "--config") throws -> Configuration {
    do {
      return try ConfigurationParser.load(file: path)
    } catch {
      throw UsageError(describe(error.errors, flag: flag).joined(separator: "\n"))
    }
  }

  static func describe(_ errors: [ConfigError], flag: String = "--config") -> [String] {
    if errors.count == 1, let error = errors.first, error.isAboutTheFile {
      return ["\(flag) \(error.file): \(error.message); expected \(Expected.configuration)"]
    }
    return errors.map(\.description)
  }

  static func signingKey(_ path: String, flag: String) throws -> PrivateKey {
    let content = try bytes(path, flag: flag, expected: Expected.signingKey)
    let key: PrivateKey
    do {
      key = try PrivateKey.load(path)
    } catch {
      let labels = PEMLabels.of(content)
      let problem =
        labels.isEmpty
        ? "not PEM (no -----BEGIN line)" : "PEM with \(labels.joined(separator: ", ")) but no private key"
      throw usage(flag, path, problem, expected: Expected.signingKey)
    }
    guard key.pinListPublicKey != nil else {
      throw usage(flag, path, "a private key, but not on P-256", expected: Expected.signingKey)
    }
    return key
  }
}

/// The labels of a file's `-----BEGIN LABEL-----` lines, in order, each once.
enum PEMLabels {
  static func of(_ bytes: [UInt8]) -> [String] {
    let text = String(decoding: bytes.prefix(1 << 20), as: UTF8.self)
    var labels: [String] = []
    for line in text.split(separator: "\n") where line.hasPrefix("-----BEGIN ") {
      let label = line.dropFirst(11).prefix { $0 != "-" }
      if !label.isEmpty, !labels.contains(String(label)) { labels.append(String(label)) }
    }
    return labels
  }
}
