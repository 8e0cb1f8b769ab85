import ArgumentParser
import PinConfig
import PinTLS

struct VersionCommand: ParsableCommand {
  static let configuration = CommandConfiguration(commandName: "version", abstract: "Print the version.")

  func run() {
    print("pinproxy \(Pinproxy.version) (\(OpenSSLLibrary.version))")
  }
}
