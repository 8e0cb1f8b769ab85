import ArgumentParser
import Foundation
import PinHTTP

/// `pinproxy reload --admin HOST:PORT`: asks the running daemon to reload
/// its configuration (`POST /reload`, as SIGHUP does) and waits for the
/// answer, which comes once the new generation is in force: a request sent
/// after this returns is decided by the new configuration.
struct ReloadCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "reload",
    abstract: "Reload a running pinproxy's configuration and say whether it took.",
    discussion: """
      Sends POST /reload to the admin listener (admin.address): with admin.tokenFile set, pass the \
      same file with --token-file; without one, only a loopback client may reload. Prints \
      `ok generation N` (exit 0) or the errors, the running configuration kept (exit 1); warnings \
      follow either way.
      """)

  @Option(name: .long, help: "The admin listener, HOST:PORT (an IP address or localhost).")
  var admin: String

  @Option(name: .long, help: "A file holding the admin bearer token (admin.tokenFile).")
  var tokenFile: String?

  func run() throws {
    let token = try AdminFetch.token(from: tokenFile)
    let answer: (status: Int, body: [UInt8])
    do {
      answer = try AdminFetch.exchange("POST", "/reload", with: admin, token: token)
    } catch {
      printError("pinproxy: reload: \(PrintableText.escaped(error.description))")
      throw ExitCode(1)
    }
    let text = String(decoding: answer.body, as: UTF8.self)
    switch answer.status {
    case 200:
      print(text, terminator: "")
    case 422:
      print(text, terminator: "")
      throw ExitCode(1)
    default:
      printError(
        "pinproxy: reload: \(admin) answered \(answer.status): "
          + PrintableText.escaped(text.trimmingCharacters(in: .whitespacesAndNewlines)))
      throw ExitCode(1)
    }
  }
}
