import ArgumentParser
import Foundation
import PinHTTP
import PinAppFormats

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
      let root = try ImportCommand.dictionary(
        file, label: "import ats",
        expected: "an Info.plist (XML or binary) or a plist or JSON holding NSAppTransportSecurity")
      // The list is only named in the YAML; read it now so that a wrong
      // path fails here rather than at the next `pinproxy check`.
      if let ctLogList { _ = try InputFile.logStore(ctLogList, flag: "--ct-log-list", minimumSCTs: 1) }
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
      let root = try ImportCommand.dictionary(
        file, label: "import trustkit",
        expected:
          "a TrustKit configuration: an Info.plist with TSKConfiguration, or the dictionary as plist or JSON")
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

    static let expected = "an Android network_security_config.xml (<network-security-config> in XML)"

    func run() throws {
      let bytes = try InputFile.bytes(file, flag: "import android", expected: Self.expected)
      if let raw {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: raw, isDirectory: &isDirectory), isDirectory.boolValue
        else {
          throw UsageError("--raw \(raw): no such directory; expected the app's res/raw directory")
        }
      }
      let document: XMLNode
      do {
        document = try XMLReader.parse(bytes)
      } catch {
        throw InputFile.usage(
          "import android", file, PrintableText.escaped(error.description), expected: Self.expected)
      }
      try ImportCommand.emit { () throws(ImportError) in
        try AndroidImporter.translate(document, input: file, options: .init(rawDirectory: raw))
      }
    }
  }

  /// A plist (XML or binary) or JSON file whose top level is a dictionary.
  static func dictionary(_ file: String, label: String, expected: String) throws -> [String: Any] {
    let data = Data(try InputFile.bytes(file, flag: label, expected: expected))
    let first = data.first { ![0x20, 0x09, 0x0a, 0x0d].contains($0) }
    let parsed: Any
    do {
      parsed =
        first == UInt8(ascii: "{")
        ? try JSONSerialization.jsonObject(with: data)
        : try PropertyListSerialization.propertyList(from: data, options: [], format: nil)
    } catch {
      let what =
        first == UInt8(ascii: "{") ? "not valid JSON" : "neither a property list (XML or binary) nor JSON"
      throw InputFile.usage(label, file, what, expected: expected)
    }
    guard let dictionary = parsed as? [String: Any] else {
      throw InputFile.usage(label, file, "the top level is not a dictionary", expected: expected)
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
