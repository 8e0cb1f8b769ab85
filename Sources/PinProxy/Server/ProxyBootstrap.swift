import Foundation
import PinConfig
import PinTLS

/// Turns a configuration into the first runtime snapshot: loads (or, the
/// first time, creates) the local CA when a listener terminates client TLS,
/// and says once where its certificate is.
public enum ProxyBootstrap {
  public struct Failure: Error, CustomStringConvertible {
    public let description: String
  }

  public static func snapshot(for configuration: Configuration, logger: ProxyLogger) throws(Failure)
    -> RuntimeSnapshot
  {
    let ca = try localCA(for: configuration, logger: logger)
    let snapshot: RuntimeSnapshot
    do {
      // Fetched CRLs are kept beside the CA and read back at start.
      let revocation = RevocationState(
        directory: StateDirectory.resolve(configuration.stateDirectory) + "/revocation")
      snapshot = try RuntimeSnapshot.compile(
        configuration, generation: 1, ca: ca, revocation: revocation, warn: storeWarning(logger))
    } catch {
      throw Failure(description: error.description)
    }
    warnAboutPinExpiry(configuration, logger: logger)
    warnAboutWaivedPins(snapshot, logger: logger)
    return snapshot
  }

  /// A warning per passthrough entry that waives a rule's pins; at start
  /// and on every reload.
  @discardableResult
  static func warnAboutWaivedPins(_ snapshot: RuntimeSnapshot, logger: ProxyLogger) -> [String] {
    snapshot.passthroughWaivers.map { _, message in
      logger.log(.warning, "pins-waived", ["reason": message])
      return message
    }
  }

  /// A warning per rule whose pins expired (they fail open) or expire
  /// within 30 days; logged at start and on every reload.
  @discardableResult
  static func warnAboutPinExpiry(_ configuration: Configuration, logger: ProxyLogger, now: Date = Date())
    -> [String]
  {
    var said: [String] = []
    // A listener opened to every address on purpose: said at start and on every reload.
    for notice in AccessNotice.notices(for: configuration) {
      logger.log(.warning, "open-to-everyone", ["reason": notice.message])
      said.append(notice.message)
    }
    for notice in PinExpiryNotice.notices(for: configuration, at: now) {
      logger.log(
        .warning, notice.state == .expired ? "pins-expired" : "pins-expire-soon",
        [
          "rule": notice.rule, "expires": notice.expires.formatted(.iso8601),
          "reason": notice.message(at: now),
        ])
      said.append("rule \(notice.rule): \(notice.message(at: now))")
    }
    return said
  }

  /// Logs a stored pin list that was ignored (corrupt, failing its
  /// signatures): the rule goes on with its fallback or nothing.
  static func storeWarning(_ logger: ProxyLogger) -> (String) -> Void {
    { reason in logger.log(.warning, "dynamic-pins-store-ignored", ["reason": reason]) }
  }

  /// The CA the configuration asks for; nil when no listener terminates client TLS.
  /// - Parameter reloading: a reload says nothing of a CA already in use
  ///   (the line, with its install hint, is for the start and for a CA
  ///   the reload created).
  /// - Parameter running: the CA in use, kept when the files still hold it.
  public static func localCA(
    for configuration: Configuration, logger: ProxyLogger, reloading: Bool = false, running: LocalCA? = nil
  ) throws(Failure) -> LocalCA? {
    guard RuntimeSnapshot.needsLocalCA(configuration) else { return nil }
    do {
      if let supplied = configuration.localCA {
        let ca = try LocalCA.load(
          certificate: supplied.certificate.path, key: supplied.key.path, reusing: running)
        if !reloading {
          logger.log(.info, "local-ca", ["certificate": supplied.certificate.path, "source": "localCA"])
        }
        return ca
      }
      let directory = StateDirectory.resolve(configuration.stateDirectory)
      let (ca, created) = try LocalCA.loadOrCreate(in: directory, reusing: running)
      if reloading && !created { return ca }
      logger.log(
        .info, "local-ca",
        [
          "certificate": "\(directory)/\(LocalCA.certificateFile)", "created": created ? "yes" : "no",
          "install": StateDirectory.installHint(directory),
        ])
      return ca
    } catch {
      throw Failure(description: "local CA: \(error.description)")
    }
  }
}
