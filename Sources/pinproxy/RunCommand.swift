import ArgumentParser
import Dispatch
import Foundation
import PinProxy

struct RunCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run", abstract: "Run the proxy (the daemon).",
    discussion: "Without --config: one forward listener on 127.0.0.1:3128, system anchors, TLS 1.2+.")

  @Option(name: .long, help: "The configuration file.")
  var config: String?

  @Flag(name: .long, help: "Log every request (debug level).")
  var verbose = false

  func run() throws {
    let configuration: Configuration
    if let config {
      do {
        configuration = try ConfigurationParser.load(file: config)
      } catch {
        throw UsageError(error.description)
      }
    } else {
      configuration = RuntimeSnapshot.defaultConfiguration
    }
    let logger = ProxyLogger(minimum: verbose ? .debug : .info)
    let snapshot: RuntimeSnapshot
    do {
      snapshot = try ProxyBootstrap.snapshot(for: configuration, logger: logger)
    } catch {
      throw UsageError(error.description)
    }
    let server: ProxyServer
    do {
      server = try ProxyServer(snapshot: snapshot, logger: logger)
    } catch {
      printError("pinproxy: \(error.description)")
      throw ExitCode(1)
    }
    for (name, address) in server.boundAddresses {
      logger.log(.info, "listening", ["listener": name, "address": address])
    }
    // Stop on SIGTERM / SIGINT. (Draining in-flight requests is the operations work.)
    for signalNumber in [SIGTERM, SIGINT] {
      signal(signalNumber, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
      source.setEventHandler {
        server.stop()
        logger.log(.info, "stopped", ["signal": String(signalNumber)])
        Foundation.exit(0)
      }
      source.resume()
      signalSources.append(source)
    }
    dispatchMain()
  }
}

nonisolated(unsafe) private var signalSources: [DispatchSourceSignal] = []
