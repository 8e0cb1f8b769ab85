import ArgumentParser
import Foundation
import PinHTTP
import PinImport

/// `pinproxy import ats|trustkit|android FILE`: the pinning and transport
/// rules an app already ships, as pinproxy `domains:` on standard output.
/// What cannot be expressed goes to standard error and makes the exit 1;
/// an unreadable file exits 2.
struct ImportCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "import",
    abstract: "Turn an app's own pinning and transport configuration into pinproxy rules.",
    discussion: """
      Prints YAML (anchorSets, defaults, certificateTransparency, domains) that `pinproxy check` \
      accepts, each setting commented with the key it came from. Every app setting that pinproxy \
      cannot express is listed on standard error as "dropped:" and the exit status is then 1; \
      changes of reach are listed as "approximated:", app-only switches as "ignored:".
      """,
    subcommands: [ATS.self, TrustKit.self, Android.self])

  struct ATS: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "ats", abstract: "NSAppTransportSecurity from an Info.plist (XML or binary).")

    @Argument(help: "The Info.plist, or a plist holding the NSAppTransportSecurity dictionary.")
    var file: String

    @Option(name: .long, help: "The CT log list to use for NSRequiresCertificateTransparency.")
    var ctLogList: String?

    func run() throws {
      let root = try ImportCommand.dictionary(file)
      try ImportCommand.emit { () throws(ImportError) in
        try ATSImporter.translate(root, input: file, options: .init(transparencyLogList: ctLogList))
      }
    }
  }

  struct TrustKit: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "trustkit", abstract: "A TrustKit configuration (TSKConfiguration), plist or JSON.")

    @Argument(help: "An Info.plist with TSKConfiguration, or the configuration as plist or JSON.")
    var file: String

    func run() throws {
      let root = try ImportCommand.dictionary(file)
      try ImportCommand.emit { () throws(ImportError) in try TrustKitImporter.translate(root, input: file) }
    }
  }

  struct Android: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "android", abstract: "An Android network_security_config.xml.")

    @Argument(help: "res/xml/network_security_config.xml")
    var file: String

    @Option(name: .long, help: "The app's res/raw directory, for <certificates src=\"@raw/NAME\">.")
    var raw: String?

    func run() throws {
      let bytes = try ImportCommand.read(file)
      try ImportCommand.emit { () throws(ImportError) in
        try AndroidImporter.translate(XMLReader.parse(bytes), input: file, options: .init(rawDirectory: raw))
      }
    }
  }

  static func read(_ file: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: file) else {
      throw UsageError("cannot read \(file)")
    }
    guard data.count <= 4 << 20 else { throw UsageError("\(file) is over 4 MiB") }
    return [UInt8](data)
  }

  /// A plist (XML or binary) or JSON file whose top level is a dictionary.
  static func dictionary(_ file: String) throws -> [String: Any] {
    let data = Data(try read(file))
    let first = data.first { ![0x20, 0x09, 0x0a, 0x0d].contains($0) }
    let parsed: Any
    do {
      parsed =
        first == UInt8(ascii: "{")
        ? try JSONSerialization.jsonObject(with: data)
        : try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
    } catch {
      throw UsageError(
        "\(file) is not a property list (XML or binary) or JSON: \(error.localizedDescription)")
    }
    guard let dictionary = parsed as? [String: Any] else {
      throw UsageError("\(file): the top level is not a dictionary")
    }
    return dictionary
  }

  static func emit(_ translate: () throws(ImportError) -> ImportedConfig) throws {
    let config: ImportedConfig
    do {
      config = try translate()
    } catch {
      throw UsageError(PrintableText.escaped(error.description))
    }
    print(YAMLWriter.write(config), terminator: "")
    // Notes quote the app's file: escaped like every untrusted string bound for a terminal.
    for line in config.ignored { printError(PrintableText.escaped("ignored: " + line)) }
    for line in config.approximated { printError(PrintableText.escaped("approximated: " + line)) }
    for line in config.dropped { printError(PrintableText.escaped("dropped: " + line)) }
    if !config.dropped.isEmpty { throw ExitCode(1) }
  }
}
