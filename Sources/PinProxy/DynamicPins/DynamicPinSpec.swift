import Foundation
import PinConfig
import PinTLS
import PinTrust

/// A rule's `dynamicPins`, compiled: the URL and key checked, the fallback
/// file parsed, and the file the list is stored in. Its `id` names the list
/// by what makes it the same list (rule domain, URL, key, mode), so a reload
/// that keeps them keeps the list, and a new key never reads a list stored
/// under the old one.
public final class DynamicPinSpec: Sendable {
  public let id: String
  public let ruleDomain: String
  public let url: InternalURL
  public let verifier: PinListPublicKey
  public let useChallenge: Bool
  public let expectedCommonNames: [String]
  public let updateInterval: Double
  public let expirationUpdateThreshold: Double
  public let fallback: PinListDocument?
  /// Where the accepted list is kept: `stateDirectory/pins/<domain>-<id>.json`.
  public let file: String

  init(
    config: DynamicPinsConfig, ruleDomain: String, stateDirectory: String, url: InternalURL,
    verifier: PinListPublicKey, fallback: PinListDocument?
  ) {
    let identity = [ruleDomain, config.url, config.publicKey, config.useChallenge ? "challenge" : "v1"]
      .joined(separator: "\n")
    let digest = SHA256.digest(Array(identity.utf8)).bytes.prefix(6)
    id = digest.map { String(format: "%02x", $0) }.joined()
    self.ruleDomain = ruleDomain
    self.url = url
    self.verifier = verifier
    useChallenge = config.useChallenge
    expectedCommonNames = config.expectedCommonNames
    updateInterval = config.updateInterval
    expirationUpdateThreshold = config.expirationUpdateThreshold
    self.fallback = fallback
    let safeDomain = String(
      ruleDomain.map { $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" ? $0 : "_" })
    file = "\(stateDirectory)/pins/\(safeDomain)-\(id).json"
  }

  /// Checks `config` and builds the spec, or returns the errors, each naming
  /// the key (and the fallback file) at fault.
  static func compile(
    _ config: DynamicPinsConfig, domain: DomainConfig, configuration: Configuration
  ) -> Result<DynamicPinSpec, ConfigErrors> {
    var errors: [ConfigError] = []
    func fail(_ location: Location, _ message: String) {
      errors.append(ConfigError(file: configuration.file, at: location, message: message))
    }
    let url = InternalURL(config.url)
    if url == nil {
      fail(config.urlLocation, "\"\(config.url)\" is not an http:// or https:// URL with a host")
    }
    var verifier: PinListPublicKey?
    do {
      verifier = try PinListPublicKey(base64: config.publicKey)
    } catch {
      fail(config.publicKeyLocation, error.description)
    }
    var fallback: PinListDocument?
    if let path = config.fallback {
      if let data = try? BoundedFile.read(path.path, limit: InternalRequest.defaultMaximumBodyBytes) {
        do {
          fallback = try PinListDocument.parse(data, signedEntries: false)
        } catch {
          fail(path.location, "\(path.path): \(error.description)")
        }
      } else {
        fail(path.location, "\(path.path): cannot read the fallback pin list")
      }
    }
    guard errors.isEmpty, let url, let verifier else { return .failure(ConfigErrors(errors: errors)) }
    return .success(
      DynamicPinSpec(
        config: config, ruleDomain: domain.domain.description,
        stateDirectory: StateDirectory.resolve(configuration.stateDirectory), url: url, verifier: verifier,
        fallback: fallback))
  }
}
