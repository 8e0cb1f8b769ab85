import ArgumentParser
import Foundation
import PinHTTP
import PinProxy
import PinTLS
import PinTrust

/// `pinproxy ct-hook --config FILE`: a Cert Spotter hook. For each
/// certificate Cert Spotter discovers for a watched name, it judges the
/// certificate against the pins of the rules its names fall under and
/// records, in the state directory, each one some rule's pins do not cover;
/// the running daemon shows it within seconds. Reads the environment
/// `certspotter-script(8)` documents: 0.15 and later (`EVENT`,
/// `CERT_FILENAME` holding the chain, `PUBKEY_SHA256`, `CERT_SHA256`,
/// `TBS_SHA256`, `JSON_FILENAME` with `dns_names`, `NOT_BEFORE_RFC3339`,
/// `ISSUER_DN`, …) and the older variables (`PUBKEY_HASH`, `FINGERPRINT`,
/// `DNS_NAMES`, `NOT_BEFORE_UNIXTIME`).
struct CTHookCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ct-hook",
    abstract: "Cert Spotter hook: record certificates issued for pinned names with a key no pin covers.",
    discussion: """
      Run by certspotter (-script, or an executable in hooks.d that execs it) with the certificate in \
      its environment. Prints the rules whose pins cover the certificate, then one line per rule whose pins \
      do not, and records those in \
      STATE/ct/unpinned-issuances.json (at most 256, one per certificate), and exits 0; events other \
      than discovered_cert are ignored. Exit 2: the configuration or the certificate cannot be read.
      """)

  @Option(name: .long, help: "The configuration file (the rules and the state directory).")
  var config: String

  /// The longest environment value read: names, digests and dates are far shorter.
  static let maximumVariableBytes = 64 * 1024

  func run() throws {
    let environment = ProcessInfo.processInfo.environment.mapValues {
      String($0.prefix(Self.maximumVariableBytes))
    }
    if let event = environment["EVENT"], event != "discovered_cert" {
      print("ct-hook: event \(PrintableText.escaped(event)) ignored (only discovered_cert is judged)")
      return
    }
    let (configuration, snapshot) = try CheckedConfiguration.load(config)
    let sighting = try CertSpotterSighting.read(environment, at: Date())
    let unpinned = snapshot.unpinnedIssuances([sighting], at: sighting.seen)
    let governed = Set(
      sighting.names.flatMap { snapshot.rules(forCertificateName: $0).filter(\.pins).map(\.name) })
    let covered = governed.subtracting(unpinned.keys).sorted()
    if governed.isEmpty {
      print(
        "ct-hook: no pinned rule governs \(PrintableText.escaped(sighting.names.joined(separator: ", ")))")
    } else if !covered.isEmpty {
      print("ct-hook: covered by the pins of \(covered.joined(separator: ", "))")
    }
    guard !unpinned.isEmpty else { return }
    let path = IssuanceLog.path(stateDirectory: StateDirectory.resolve(configuration.stateDirectory))
    let added: Bool
    do {
      added = try IssuanceLog.record(sighting, in: path)
    } catch {
      throw UsageError("ct-hook: \(error.description)")
    }
    for (rule, issuances) in unpinned.sorted(by: { $0.key < $1.key }) {
      for issuance in issuances {
        print(
          PrintableText.escaped(
            "unpinned issuance: rule \(rule): \(sighting.names.joined(separator: ",")) key "
              + "\(SPKIPin.format(sighting.leafKey)) certificate \(sighting.certificate.lowercaseHex): "
              + issuance.reasons.joined(separator: "; ") + (added ? "" : " (already recorded)")))
      }
    }
  }
}

/// The certificate Cert Spotter describes in a hook's environment, as an
/// `IssuanceSighting`. The certificate file, when there is one, is the
/// authority for the key and the chain (a variable that contradicts it is
/// refused); names come from the JSON file, `DNS_NAMES` or the certificate.
enum CertSpotterSighting {
  static func read(_ environment: [String: String], at time: Date) throws -> IssuanceSighting {
    var certificates: [Certificate] = []
    if let file = environment["CERT_FILENAME"], !file.isEmpty {
      certificates = try InputFile.certificates(
        file, flag: "CERT_FILENAME", expected: "the PEM certificate chain Cert Spotter saved"
      ).map { $0.value() }
    }
    let leaf = certificates.first
    let announcedKey = (environment["PUBKEY_SHA256"] ?? environment["PUBKEY_HASH"]).map(digest)
    let announcedCertificate = (environment["CERT_SHA256"] ?? environment["FINGERPRINT"]).map(digest)
    guard let key = leaf?.spkiFingerprint ?? announcedKey ?? nil else {
      throw UsageError(
        "ct-hook: neither CERT_FILENAME nor PUBKEY_SHA256 (or PUBKEY_HASH) names the certificate's key")
    }
    if let leaf, let announcedKey, announcedKey != leaf.spkiFingerprint {
      throw UsageError("ct-hook: PUBKEY_SHA256 does not match the key of the certificate in CERT_FILENAME")
    }
    guard let certificate = leaf?.fingerprint ?? announcedCertificate ?? nil else {
      throw UsageError(
        "ct-hook: neither CERT_FILENAME nor CERT_SHA256 (or FINGERPRINT) names the certificate")
    }
    var names = try jsonNames(environment["JSON_FILENAME"]) ?? []
    if let listed = environment["DNS_NAMES"] {
      names += listed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }
    names += leaf?.dnsNames ?? []
    names = unique(names.map { $0.lowercased() }.filter { !$0.isEmpty && $0.utf8.count <= 253 })
    guard !names.isEmpty else {
      throw UsageError("ct-hook: no DNS name: JSON_FILENAME, DNS_NAMES and the certificate name none")
    }
    let above = certificates.dropFirst()
    return IssuanceSighting(
      names: Array(names.prefix(IssuanceLog.maximumNames)), leafKey: key, certificate: certificate,
      identity: (environment["TBS_SHA256"].map(digest) ?? nil) ?? certificate,
      issuerKeys: above.isEmpty ? nil : above.prefix(16).map(\.spkiFingerprint),
      issuerCertificates: above.prefix(16).map(\.fingerprint),
      issuer: String((leaf?.issuer ?? environment["ISSUER_DN"] ?? "unknown").prefix(1024)),
      notBefore: leaf?.notBefore ?? instant(environment, "NOT_BEFORE"),
      notAfter: leaf?.notAfter ?? instant(environment, "NOT_AFTER"), seen: time)
  }

  private static func digest(_ text: String) -> Digest256? {
    Digest256(hex: text.trimmingCharacters(in: .whitespaces))
  }

  /// `dns_names` of Cert Spotter's JSON file (0.15 and later).
  private static func jsonNames(_ path: String?) throws -> [String]? {
    guard let path, !path.isEmpty else { return nil }
    let bytes = try InputFile.bytes(
      path, flag: "JSON_FILENAME", expected: "Cert Spotter's JSON file", limit: 1 << 20)
    guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
      throw UsageError("ct-hook: JSON_FILENAME \(path): not a JSON object")
    }
    return (object["dns_names"] as? [Any])?.compactMap { $0 as? String }
  }

  /// `NAME_RFC3339`, else `NAME_UNIXTIME` (both set by 0.15 and later; the
  /// second by older releases too).
  private static func instant(_ environment: [String: String], _ name: String) -> Date? {
    if let text = environment[name + "_RFC3339"], let date = try? Date(text, strategy: .iso8601) {
      return date
    }
    if let text = environment[name + "_UNIXTIME"], let seconds = Int64(text) {
      return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
    return nil
  }

  private static func unique(_ names: [String]) -> [String] {
    var seen = Set<String>()
    return names.filter { seen.insert($0).inserted }
  }
}
