import ArgumentParser
import Dispatch
import Foundation
import PinConfig
import PinProxy

struct RunCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "run", abstract: "Run the proxy (the daemon).",
    discussion: """
      Without --config: one forward listener on 127.0.0.1:3128, system anchors, TLS 1.2+.
      Relative paths in the config (anchors, pins, stateDirectory, ...) are relative to the config \
      file's directory, not to the working directory.

      Signals: SIGHUP reloads the config (a bad file is logged and the running one kept); SIGTERM or \
      SIGINT stops accepting, lets in-flight requests finish for up to timeouts.drain (30s), exits 0.
      Logs: one line per event on standard error; text, or JSON under systemd's journal \
      (`logging:` in the config sets level, format, access lines).
      Admin endpoint (`admin: {address: HOST:PORT}` in the config): /healthz (200, 503 while \
      draining), /metrics (Prometheus), /policies (JSON).
      Ready: --ready-file, READY=1 under systemd (Type=notify), or /healthz answering.
      """)

  @Option(name: .long, help: "The configuration file.")
  var config: String?

  @Flag(name: .long, help: "Log every request (debug level).")
  var verbose = false

  @Option(
    name: .long,
    help: ArgumentHelp(
      "Create this file once every listener is bound and serving; removed when the proxy stops accepting.",
      discussion: "Written atomically: `pid N`, then `listener NAME ADDRESS` per listener, `admin ADDRESS`.",
      valueName: "path"))
  var readyFile: String?

  func run() throws {
    // Before anything is bound: a file left by an earlier run must not pass for this one's.
    let ready = try readyFile.map { path throws(UsageError) in try ReadyFile(path) }
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
    // After the file's own errors: a file that would bind nothing is one more.
    if let missing = configuration.missingListeners { throw UsageError(missing.description) }
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

    // SIGHUP and POST /reload: a reload off the event loops, on the control
    // queue (one at a time); a bad file keeps the running configuration.
    @Sendable func reloadNow() -> ReloadOutcome {
      guard let configFile else {
        let reason = "running the embedded default; there is no file to reload"
        logger.log(.warning, "reload-skipped", ["reason": reason])
        return ReloadOutcome(ok: false, generation: server.generation, errors: [reason], warnings: [])
      }
      notifier.reloading()
      switch server.reloadReporting(file: configFile, logger: logger) {
      case .success(let (generation, warnings)):
        logger.log(.info, "reload-ok", ["file": configFile, "generation": String(generation)])
        notifier.ready(status: "serving, configuration generation \(generation)")
        return ReloadOutcome(ok: true, generation: generation, errors: [], warnings: warnings)
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
        return ReloadOutcome(
          ok: false, generation: server.generation, errors: errors.errors.map(\.description), warnings: [])
      }
    }
    installSignal(SIGHUP, on: control) { _ = reloadNow() }
    server.onReloadRequest { reply in control.async { reply(reloadNow()) } }
    // SIGTERM / SIGINT: stop accepting, let in-flight requests finish up to the deadline, exit 0.
    for signalNumber in [SIGTERM, SIGINT] {
      installSignal(signalNumber, on: control) {
        guard !server.isDraining else { return }
        notifier.stopping(status: "draining")
        let open = server.openConnections
        // Logged once the listeners are closed: whoever reads "draining" can
        // rely on new connections being refused.
        server.drain(deadline: drainDeadline) {
          ready?.remove()
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
    // On the signal queue: a SIGTERM that came first has begun the drain,
    // and a file written after its removal would outlive the process.
    let failure = control.sync { () -> UsageError? in
      guard !server.isDraining else { return nil }
      do throws(UsageError) {
        try ready?.write(listeners: server.boundAddresses, admin: server.adminAddress)
        return nil
      } catch {
        return error
      }
    }
    if let failure {
      // A waiter would wait forever: better to stop now, loudly.
      printError("pinproxy: \(failure.message)")
      throw ExitCode(1)
    }
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
  // `resume` arms the source later, on Dispatch's manager queue; until then
  // the signal is ignored (SIG_IGN above). Waiting for the registration
  // means that once "listening" and the ready file say the daemon is up, a
  // SIGTERM or SIGHUP sent at once is handled, never lost.
  let registered = DispatchSemaphore(value: 0)
  source.setRegistrationHandler { registered.signal() }
  source.resume()
  registered.wait()
  signalSources.append(source)
}
