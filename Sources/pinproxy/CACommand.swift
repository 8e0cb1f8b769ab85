import ArgumentParser
import Foundation
import PinConfig
import PinProxy
import PinTLS

struct CACommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "ca", abstract: "The local CA that signs certificates for intercepted hosts.",
    subcommands: [Initialize.self, Show.self])

  static func directory(_ option: String?) -> String { option ?? StateDirectory.default }

  struct Initialize: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "init", abstract: "Create the CA (key mode 0600) in the state directory.")

    @Option(
      name: .long, help: "Where ca.pem and ca.key live (default: $STATE_DIRECTORY or /var/lib/pinproxy).")
    var stateDirectory: String?

    func run() throws {
      let directory = CACommand.directory(stateDirectory)
      do {
        try LocalCA.create(in: directory)
      } catch {
        throw UsageError(error.description)
      }
      print(
        "created \(directory)/\(LocalCA.certificateFile) (install it in clients: \(StateDirectory.installHint(directory)))"
      )
    }
  }

  struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "show", abstract: "Print the CA certificate (PEM).")

    @Option(name: .long, help: "Where ca.pem lives (default: $STATE_DIRECTORY or /var/lib/pinproxy).")
    var stateDirectory: String?

    func run() throws {
      let path = CACommand.directory(stateDirectory) + "/" + LocalCA.certificateFile
      // The file is found through the directory: the message names the flag (or its default).
      let flag = stateDirectory == nil ? "state directory" : "--state-directory"
      let certificates = try InputFile.certificates(
        path, flag: flag,
        expected: "the local CA certificate (PEM), created by pinproxy ca init --state-directory DIR")
      print(String(decoding: certificates[0].pem, as: UTF8.self), terminator: "")
    }
  }
}
