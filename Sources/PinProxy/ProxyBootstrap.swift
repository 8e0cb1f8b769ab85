import Foundation
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
    var ca: LocalCA?
    if RuntimeSnapshot.needsLocalCA(configuration) {
      do {
        if let supplied = configuration.localCA {
          ca = try LocalCA.load(certificate: supplied.certificate.path, key: supplied.key.path)
          logger.log(.info, "local-ca", ["certificate": supplied.certificate.path, "source": "localCA"])
        } else {
          let directory = StateDirectory.resolve(configuration.stateDirectory)
          let (loaded, created) = try LocalCA.loadOrCreate(in: directory)
          ca = loaded
          logger.log(
            .info, "local-ca",
            [
              "certificate": "\(directory)/\(LocalCA.certificateFile)", "created": created ? "yes" : "no",
              "install": StateDirectory.installHint(directory),
            ])
        }
      } catch {
        throw Failure(description: "local CA: \(error.description)")
      }
    }
    do {
      return try RuntimeSnapshot.compile(configuration, generation: 1, ca: ca)
    } catch {
      throw Failure(description: error.description)
    }
  }
}
