import ArgumentParser
import Foundation
import PinConfig
import PinProxy
import PinTLS
import PinTrust

struct PinCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pin",
    abstract:
      "Print the SPKI pin and certificate SHA-256 of each certificate in a file or served at HOST:PORT.",
    discussion: """
      HOST:PORT connects and prints the chain the server presents, without verifying it. \
      --connect-to or --config (its connectTo) dial another address for HOST:PORT, as the daemon \
      does, with HOST still sent as SNI. --pem writes the certificates as PEM instead, leaf first, \
      ready for `pinproxy evaluate --chain`.
      """)

  @Argument(help: "A PEM or DER file, or HOST:PORT.")
  var source: String

  @Option(
    name: .customLong("connect-to"),
    help: "HOST:PORT:ADDRESS:PORT: connect to ADDRESS:PORT for HOST:PORT (curl's --connect-to). Repeatable.")
  var connectTo: [String] = []

  @Option(name: .long, help: "Dial as this configuration's connectTo maps HOST:PORT.")
  var config: String?

  @Flag(name: .long, help: "Write the certificates as PEM (a chain file for evaluate --chain).")
  var pem = false

  func run() throws {
    let certificates: [X509Certificate]
    if FileManager.default.fileExists(atPath: source) {
      guard connectTo.isEmpty && config == nil else {
        throw UsageError("--connect-to and --config apply to HOST:PORT, not to a file (\(source))")
      }
      certificates = try InputFile.certificates(
        source, flag: "pin", expected: "\(InputFile.Expected.certificates), or HOST:PORT")
    } else if let target = ConfigValues.hostPort(source) {
      let address = try dialAddress(for: target)
      if let address {
        printError("connecting to \(address.host):\(address.port) for \(target.host):\(target.port)")
      }
      do {
        certificates = try TLSProbe.fetchChain(
          host: target.host, port: target.port, address: address.map { ($0.host, $0.port) })
      } catch {
        printError("pinproxy: \(error.description)")
        throw ExitCode(1)
      }
    } else {
      throw UsageError("\(source): no such file, and not HOST:PORT")
    }
    if pem {
      for certificate in certificates { FileHandle.standardOutput.write(Data(certificate.pem)) }
      return
    }
    print(
      certificates.enumerated().map { CertificatePrinter.describe($0.element.value(), index: $0.offset) }
        .joined(separator: "\n"))
  }

  /// Where to connect for `target`: the first `--connect-to`, then the
  /// first `connectTo` of `--config`, that maps it (the daemon's rule: same
  /// host, however spelt, and same port); nil to dial the target itself.
  func dialAddress(for target: HostPort) throws -> HostPort? {
    var rules: [ConnectToRule] = []
    for text in connectTo {
      guard let rule = ConfigurationParser.connectTo(text) else {
        throw UsageError("--connect-to \"\(text)\" is not HOST:PORT:ADDRESS:PORT")
      }
      rules.append(rule)
    }
    if let config { rules += try InputFile.configuration(config).connectTo }
    let host = TrustHost(target.host)
    let mapped = rules.first { rule in
      rule.from.port == target.port && (host.map { TrustHost(rule.from.host) == $0 } ?? false)
    }?.to
    if mapped == nil && !connectTo.isEmpty {
      printError("note: no --connect-to maps \(target.host):\(target.port); connecting to it directly")
    }
    return mapped
  }
}
