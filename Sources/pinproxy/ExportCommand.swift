import ArgumentParser
import Foundation
import PinConfig
import PinHTTP
import PinAppFormats
import PinProxy
import PinTLS

/// `pinproxy export ats|trustkit|android|okhttp|certspotter --config FILE`:
/// the policy's pins in the form an app ships (or Cert Spotter watches), on
/// standard output. What the format cannot express is listed on standard
/// error as `import` lists it, and the exit is then 1. A rule whose pins
/// would lock users out at the first rotation (one pin, no backup) is
/// refused for TrustKit (exit 2: TrustKit itself refuses it at app start)
/// and warned about for the others unless `--allow-single-pin`.
struct ExportCommand: ParsableCommand {
  enum Format: String, ExpressibleByArgument, CaseIterable {
    case ats, trustkit, android, okhttp, certspotter
  }

  static let configuration = CommandConfiguration(
    commandName: "export",
    abstract:
      "Write the policy's pins in an app's format (ATS, TrustKit, Android, OkHttp) or as a Cert Spotter watch list.",
    discussion: """
      ats: an Info.plist fragment (NSAppTransportSecurity); trustkit: a TSKConfiguration plist; android: \
      network_security_config.xml (--raw DIR writes the anchor files it names); okhttp: a Kotlin \
      CertificatePinner; certspotter: a watch list for `certspotter -watchlist`. Settings the format \
      cannot express are listed on standard error as "dropped:" or "approximated:" and the exit status \
      is then 1. A rule with a single pin is refused for trustkit (exit 2) and warned about otherwise.
      """)

  @Argument(help: "ats, trustkit, android, okhttp or certspotter.")
  var format: Format

  @Option(name: .long, help: "The configuration file.")
  var config: String

  @Option(
    name: .customLong("domain"), help: "Export only this rule (repeatable; the rule's domain as written).")
  var domains: [String] = []

  @Flag(
    name: .long, help: "Do not warn about rules with a single pin (not for trustkit, which refuses them).")
  var allowSinglePin = false

  @Option(
    name: .long, help: "android: write the anchor files the config names as @raw/NAME into this directory.")
  var raw: String?

  func run() throws {
    if raw != nil && format != .android { throw UsageError("--raw is for `export android` only") }
    let (configuration, snapshot) = try CheckedConfiguration.load(config)
    let anchorFiles = Dictionary(
      configuration.anchorSets.map { ($0.name, $0.files.map(\.path)) },
      uniquingKeysWith: { first, _ in first })
    var rules = snapshot.rules.compactMap { compiled in
      compiled.domain.map { ExportRule($0, policy: compiled.policy.policy, anchorFiles: anchorFiles) }
    }
    if !domains.isEmpty {
      let wanted = Set(domains.map { $0.lowercased() })
      for name in wanted.subtracting(rules.map(\.domain)).sorted() {
        throw UsageError("--domain \(PrintableText.escaped(name)): \(config) has no rule for it")
      }
      rules = rules.filter { wanted.contains($0.domain) }
    }
    let export: AppExport
    switch format {
    case .ats: export = ATSExporter.export(rules)
    case .trustkit: export = TrustKitExporter.export(rules)
    case .android: export = AndroidExporter.export(rules)
    case .okhttp: export = OkHttpExporter.export(rules, source: config)
    case .certspotter: export = WatchListExporter.export(rules)
    }
    if format == .trustkit, !export.singlePin.isEmpty {
      throw UsageError(
        "export trustkit: \(export.singlePin.joined(separator: ", ")) "
          + (export.singlePin.count == 1 ? "has" : "have")
          + " a single pin; TrustKit refuses to start without a backup pin for a domain. Add a backup pin: the pin of a key"
          + " that is not deployed yet")
    }
    var approximated = export.approximated
    if format == .android, !export.rawFiles.isEmpty {
      if let raw {
        try writeRawFiles(export.rawFiles, into: raw)
      } else {
        approximated.append(
          "anchors: the config names @raw/" + export.rawFiles.map(\.name).joined(separator: ", @raw/")
            + "; give --raw DIR to write those files for the app's res/raw")
      }
    }
    print(export.text, terminator: "")
    if !allowSinglePin {
      for domain in export.singlePin {
        printError(
          "warning: \(domain): a single pin; the app accepts it and locks users out at the first key rotation."
            + " Add a backup pin, or pass --allow-single-pin")
      }
    }
    for line in approximated { printError(PrintableText.escaped("approximated: " + line)) }
    for line in export.dropped { printError(PrintableText.escaped("dropped: " + line)) }
    if !approximated.isEmpty || !export.dropped.isEmpty { throw ExitCode(1) }
  }

  /// Each `@raw/NAME` as `DIR/NAME.pem`: the anchor set's files, one after
  /// the other (Android reads every certificate of a raw resource).
  private func writeRawFiles(_ files: [(name: String, files: [String])], into directory: String) throws {
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
    else { throw UsageError("--raw \(directory): no such directory") }
    for (name, paths) in files {
      var bytes: [UInt8] = []
      for path in paths {
        bytes += try InputFile.bytes(
          path, flag: "anchor file", expected: InputFile.Expected.anchors,
          limit: CertificateFile.maximumFileBytes)
        if bytes.last != UInt8(ascii: "\n") { bytes.append(UInt8(ascii: "\n")) }
      }
      let target = directory + "/" + name + ".pem"
      guard FileManager.default.createFile(atPath: target, contents: Data(bytes)) else {
        throw UsageError("--raw \(directory): cannot write \(name).pem")
      }
    }
  }
}
