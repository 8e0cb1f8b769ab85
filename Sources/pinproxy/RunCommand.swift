import ArgumentParser
import Dispatch
import Foundation
import PinConfig
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
    let logger = ProxyLogger(configuration.logging, verbose: verbose)
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
    let notifier = SystemdNotifier()
    let control = DispatchQueue(label: "pinproxy.control")
    let drainDeadline = snapshot.timeouts.drain
    let configFile = config

    // SIGHUP: reload off the event loops; a bad file keeps the running configuration.
    installSignal(SIGHUP, on: control) {
      guard let configFile else {
        return logger.log(
          .warning, "reload-skipped", ["reason": "running the embedded default; there is no file to reload"])
      }
      notifier.reloading()
      switch server.reload(file: configFile, logger: logger) {
      case .success(let generation):
        logger.log(.info, "reload-ok", ["file": configFile, "generation": String(generation)])
        notifier.ready(status: "serving, configuration generation \(generation)")
      case .failure(let errors):
        logger.log(
          .error, "reload-failed",
          [
            "file": configFile, "errors": String(errors.errors.count),
            "kept_generation": String(server.generation),
          ])
        for error in errors.errors { logger.log(.error, "config-error", ["error": error.description]) }
        notifier.ready(
          status: "serving; last reload failed, configuration generation \(server.generation) kept")
      }
    }
    // SIGTERM / SIGINT: stop accepting, let in-flight requests finish up to the deadline, exit 0.
    for signalNumber in [SIGTERM, SIGINT] {
      installSignal(signalNumber, on: control) {
        guard !server.isDraining else { return }
        notifier.stopping(status: "draining")
        let open = server.openConnections
        // Logged once the listeners are closed: whoever reads "draining" can
        // rely on new connections being refused.
        server.drain(deadline: drainDeadline) {
          logger.log(
            .info, "draining",
            ["signal": String(signalNumber), "deadline_s": String(drainDeadline), "open": String(open)])
        } completion: { remaining in
          logger.log(.info, "stopped", ["unfinished_connections": String(remaining)])
          Foundation.exit(0)
        }
      }
    }
    // Announced only now that the signals are handled: a SIGHUP or SIGTERM
    // sent on seeing "listening" (or READY=1) must not meet the default action.
    for (name, address) in server.boundAddresses {
      logger.log(.info, "listening", ["listener": name, "address": address])
    }
    if let admin = server.adminAddress {
      logger.log(.info, "listening", ["listener": "admin", "address": admin])
    }
    notifier.ready(status: "serving \(server.boundAddresses.count) listeners, configuration generation 1")
    dispatchMain()
  }
}

nonisolated(unsafe) private var signalSources: [DispatchSourceSignal] = []

/// Handles `number` on `queue` instead of the default action.
private func installSignal(
  _ number: Int32, on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void
) {
  signal(number, SIG_IGN)
  let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
  source.setEventHandler(handler: handler)
  source.resume()
  signalSources.append(source)
}
