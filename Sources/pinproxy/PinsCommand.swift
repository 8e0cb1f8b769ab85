import ArgumentParser
import Foundation
import PinConfig
import PinHTTP
import PinProxy
import PinTLS
import PinTrust

/// `pinproxy pins`: dynamic pin lists (docs/TRUST.md, dynamic
/// pinning): what is stored, a fetch now, and an operator's own signed
/// lists (Wultra v1 format) without any other tool.
struct PinsCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pins", abstract: "Dynamic pin lists: show, update, sign, keygen.",
    subcommands: [Show.self, Update.self, Sign.self, Keygen.self])

  static func snapshot(_ config: String?) throws -> RuntimeSnapshot {
    let configuration =
      try config.map { try InputFile.configuration($0) } ?? RuntimeSnapshot.defaultConfiguration
    do {
      return try RuntimeSnapshot.compile(
        configuration, generation: 1, warn: { printError(PrintableText.escaped("warning: \($0)")) })
    } catch {
      throw UsageError(error.description)
    }
  }

  struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "show", abstract: "Print each rule's stored list, with expiry (JSON).")

    @Option(name: .long, help: "The configuration file.")
    var config: String?

    func run() throws {
      print(PinListMaintenance.show(try PinsCommand.snapshot(config)))
    }
  }

  struct Update: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "update",
      abstract: "Fetch every rule's list now, verify and store it, and print what changed.",
      discussion:
        "Exits 1 when an update was refused or could not be fetched (the stored list stays). A running daemon picks up the stored lists on SIGHUP."
    )

    @Option(name: .long, help: "The configuration file.")
    var config: String

    func run() throws {
      let results = PinListMaintenance.update(try PinsCommand.snapshot(config))
      if results.isEmpty { print("no domain rule has dynamicPins") }
      var failed = false
      for result in results {
        if let failure = result.failure {
          failed = true
          print(PrintableText.escaped("\(result.rule): refused: \(failure) (kept \(result.entries) entries)"))
          continue
        }
        print(
          PrintableText.escaped(
            "\(result.rule): updated from \(result.url): \(result.entries) entries, +\(result.added.count) -\(result.removed.count), stored in \(result.file)"
          ))
        for entry in result.added { print(PrintableText.escaped("  + \(describe(entry))")) }
        for entry in result.removed { print(PrintableText.escaped("  - \(describe(entry))")) }
        if let error = result.writeError {
          failed = true
          printError("pinproxy: \(error)")
        }
      }
      if failed { throw ExitCode(1) }
    }

    func describe(_ entry: PinListEntry) -> String {
      "\(entry.name) sha256 \(entry.fingerprint.base64) expires \(ISO8601DateFormatter().string(from: entry.expires))"
    }
  }

  struct Sign: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "sign", abstract: "Print signed v1 list entries (JSON) for a list server to publish.",
      discussion:
        "Signs name&fingerprint&expires with ECDSA P-256/SHA-256. With --list, prints a whole list document.")

    @Option(name: .long, help: "The signing key (PEM, P-256), as written by `pins keygen`.")
    var key: String

    @Option(
      name: .long,
      help: "A certificate (PEM or DER) to pin: name and fingerprint are taken from it (repeatable).")
    var cert: [String] = []

    @Option(name: .long, help: "Base64 SHA-256 of the DER certificate (with --name).")
    var fingerprint: String?

    @Option(name: .long, help: "The certificate's subject common name (with --fingerprint).")
    var name: String?

    @Option(name: .long, help: "When the entry expires: 2027-06-01, an ISO 8601 instant, or Unix seconds.")
    var expires: String

    @Flag(name: .long, help: "Print {\"fingerprints\":[…]} instead of one entry per line.")
    var list = false

    func validate() throws {
      if cert.isEmpty == (fingerprint == nil) {
        throw ValidationError("give --cert, or --fingerprint with --name")
      }
      if (fingerprint == nil) != (name == nil) {
        throw ValidationError("--fingerprint and --name go together")
      }
    }

    func run() throws {
      let signer = try InputFile.signingKey(key, flag: "--key")
      guard let expiry = Self.date(expires) else {
        throw UsageError(
          "--expires \"\(expires)\" is not a date (2027-06-01), an ISO 8601 instant or Unix seconds")
      }
      var entries: [PinListEntry] = []
      if let fingerprint, let name {
        guard let digest = Digest256(base64: fingerprint) else {
          throw UsageError("--fingerprint is not base64 of a 32-byte SHA-256")
        }
        entries.append(PinListEntry(name: name, fingerprint: digest, expires: expiry))
      }
      for path in cert {
        let certificates = try InputFile.certificates(
          path, flag: "--cert",
          expected: "the certificate to pin (its leaf first): \(InputFile.Expected.certificates)")
        let leaf = certificates[0].value()
        guard let commonName = leaf.commonName else {
          throw UsageError("\(path): the certificate has no subject common name to pin under")
        }
        entries.append(PinListEntry(name: commonName, fingerprint: leaf.fingerprint, expires: expiry))
      }
      for index in entries.indices {
        do {
          entries[index].signature = try signer.signSHA256(entries[index].signedMessage)
        } catch {
          throw UsageError(error.description)
        }
      }
      let document = PinListDocument(entries: entries)
      if list {
        print(String(decoding: document.json(), as: UTF8.self))
        return
      }
      for entry in entries {
        let single = PinListDocument(entries: [entry]).json()
        // One compact object per line: the entry inside a one-entry list.
        let object = try JSONSerialization.jsonObject(with: Data(single)) as? [String: Any]
        let item = (object?["fingerprints"] as? [Any])?.first ?? [:]
        let data = try JSONSerialization.data(
          withJSONObject: item, options: [.sortedKeys, .withoutEscapingSlashes])
        print(String(decoding: data, as: UTF8.self))
      }
    }

    static func date(_ text: String) -> Date? {
      if let seconds = Int64(text), seconds > 0 { return Date(timeIntervalSince1970: Double(seconds)) }
      let formatter = ISO8601DateFormatter()
      if let date = formatter.date(from: text) { return date }
      formatter.formatOptions = [.withFullDate]
      return formatter.date(from: text)
    }
  }

  struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "keygen",
      abstract: "Write a P-256 signing key pair and print the config's publicKey value.")

    @Option(name: .long, help: "Where to write the private key (mode 0600); the public key goes to KEY.pub.")
    var key = "pin-signing-key.pem"

    func run() throws {
      guard !FileManager.default.fileExists(atPath: key) else {
        throw UsageError("--key \(key): the file exists; refusing to overwrite a signing key")
      }
      let signer: PrivateKey
      do {
        signer = try PrivateKey.generateP256()
      } catch {
        throw UsageError(error.description)
      }
      guard let publicKey = signer.pinListPublicKey else { throw UsageError("cannot export the public key") }
      guard
        FileManager.default.createFile(
          atPath: key, contents: Data(signer.pem), attributes: [.posixPermissions: 0o600])
      else { throw UsageError("--key \(key): cannot write the file (does its directory exist?)") }
      let publicPath = key + ".pub"
      guard FileManager.default.createFile(atPath: publicPath, contents: Data(signer.publicKeyPEM)) else {
        throw UsageError("--key \(key): cannot write \(publicPath)")
      }
      printError("wrote \(key) (private, keep it off the proxy host) and \(publicPath)")
      print("publicKey: \"\(publicKey)\"")
    }
  }
}
