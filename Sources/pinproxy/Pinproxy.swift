import ArgumentParser
import Foundation
import PinConfig
import PinProxy
import PinTLS

/// The `pinproxy` command. Exit codes follow docs/CONTRACTS.md: 0 success, 1 a
/// rejected evaluation, 2 a usage or input error (ArgumentParser's own
/// validation code, 64, is mapped to 2).
@main
struct Pinproxy: ParsableCommand {
  static let version = ProxyVersion.current

  static let configuration = CommandConfiguration(
    commandName: "pinproxy",
    abstract: "A pinning-aware HTTPS forwarding proxy for clients that cannot be updated.",
    subcommands: [
      RunCommand.self, CACommand.self, EvaluateCommand.self, PinCommand.self, PinsCommand.self,
      CheckCommand.self, StatusCommand.self, ReloadCommand.self, ImportCommand.self, ExportCommand.self,
      CTHookCommand.self,
      VersionCommand.self,
    ])

  static func main() {
    OpenSSLProcess.keepGlobalStateUntilExit()
    do {
      var command = try parseAsRoot()
      try command.run()
    } catch let exit as ExitCode {
      Foundation.exit(exit.rawValue)
    } catch let usage as UsageError {
      FileHandle.standardError.write(Data("pinproxy: \(usage.message)\n".utf8))
      Foundation.exit(2)
    } catch {
      let code = exitCode(for: error)
      if code == .validationFailure {
        FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
        Foundation.exit(2)
      }
      exit(withError: error)
    }
  }
}

/// Bad arguments or unusable input files: printed to stderr, exit 2.
struct UsageError: Error {
  let message: String
  init(_ message: String) { self.message = message }
}

func printError(_ text: String) {
  FileHandle.standardError.write(Data((text + "\n").utf8))
}
