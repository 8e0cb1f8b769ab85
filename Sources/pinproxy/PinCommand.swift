import ArgumentParser
import Foundation
import PinConfig
import PinProxy
import PinTLS

struct PinCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "pin",
    abstract:
      "Print the SPKI pin and certificate SHA-256 of each certificate in a file or served at HOST:PORT.",
    discussion: "HOST:PORT connects and prints the chain the server presents, without verifying it.")

  @Argument(help: "A PEM or DER file, or HOST:PORT.")
  var source: String

  func run() throws {
    let certificates: [X509Certificate]
    if FileManager.default.fileExists(atPath: source) {
      do {
        certificates = try CertificateFile.load(source)
      } catch {
        throw UsageError(error.description)
      }
    } else if let target = ConfigValues.hostPort(source) {
      do {
        certificates = try TLSProbe.fetchChain(host: target.host, port: target.port)
      } catch {
        printError("pinproxy: \(error.description)")
        throw ExitCode(1)
      }
    } else {
      throw UsageError("\(source): no such file, and not HOST:PORT")
    }
    print(
      certificates.enumerated().map { CertificatePrinter.describe($0.element.value(), index: $0.offset) }
        .joined(separator: "\n"))
  }
}
