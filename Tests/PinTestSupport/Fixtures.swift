import Foundation
import PinTLS
import PinTrust
import Synchronization

/// The committed test PKI (Tests/Fixtures/make-pki.py) and the fixed clock its
/// dates were chosen around.
public enum Fixtures {
  /// 2026-06-01T00:00:00Z: inside every "valid" certificate's dates, after the
  /// expired chain's, before the future one's.
  public static let now = Date(timeIntervalSince1970: 1_780_272_000)

  public static let directory: String = {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .appendingPathComponent("Fixtures").path
  }()

  public static let repositoryRoot: String = {
    URL(fileURLWithPath: directory).deletingLastPathComponent().deletingLastPathComponent().path
  }()

  /// Absolute path of a file under Tests/Fixtures/pki.
  public static func path(_ name: String) -> String { directory + "/pki/" + name }

  public static func x509(_ name: String) -> [X509Certificate] {
    do {
      return try CertificateFile.load(path(name))
    } catch {
      preconditionFailure("fixture \(name): \(error)")
    }
  }

  /// Every certificate of a fixture file as values. Parsed once per file
  /// and process: the fixture files never change during a run, and a debug
  /// build's certificate parsing made re-reading them most of some tests'
  /// time (several seconds under the sanitizers).
  public static func certificates(_ name: String) -> [Certificate] {
    if let known = parsed.withLock({ $0[name] }) { return known }
    let values = x509(name).map { $0.value() }
    parsed.withLock { $0[name] = values }
    return values
  }

  private static let parsed = Mutex<[String: [Certificate]]>([:])

  /// The single certificate of a fixture file.
  public static func certificate(_ name: String) -> Certificate { certificates(name)[0] }

  /// A fixture file's certificates as a server would present them.
  public static func chain(_ name: String) -> PresentedChain { PresentedChain(certificates(name).map(\.der)) }

  /// Stands in for the OS store in tests: both test roots, as a device's
  /// system store holds the public roots behind httpbin.org and app.net.
  public static func registry(sets: [String: [X509Certificate]] = [:]) -> AnchorSetRegistry {
    AnchorSetRegistry(sets: sets, systemOverride: x509("root-a.pem") + x509("root-b.pem"))
  }

  public static func host(_ text: String) -> TrustHost {
    guard let host = TrustHost(text) else { preconditionFailure("bad test host \(text)") }
    return host
  }
}

/// Compiles and evaluates a policy the way the proxy does, minus the cache.
public struct PolicyHarness {
  public var registry: AnchorSetRegistry
  public var time: Date

  public init(registry: AnchorSetRegistry = Fixtures.registry(), time: Date = Fixtures.now) {
    self.registry = registry
    self.time = time
  }

  public func compile(_ policy: SecurityPolicy, generation: UInt64 = 1, rule: RuleID = .domain(0))
    -> CompiledPolicy
  {
    do {
      return try CompiledPolicy(
        policy: policy, identity: PolicyIdentity(generation: generation, rule: rule), registry: registry)
    } catch {
      preconditionFailure("policy does not compile: \(error)")
    }
  }

  public func evaluate(_ policy: SecurityPolicy, chain: PresentedChain, host: String?) -> TrustDecision {
    let compiled = compile(policy)
    return TrustEvaluator.evaluate(
      chain, host: host.map(Fixtures.host), policy: policy, verifier: compiled, at: time)
  }

  public func evaluate(_ policy: SecurityPolicy, chain: String, host: String?) -> TrustDecision {
    evaluate(policy, chain: Fixtures.chain(chain), host: host)
  }
}

/// A real verifier that counts how often it is asked: the proof that a cache
/// hit skipped chain building.
public final class CountingVerifier: ChainVerifier, @unchecked Sendable {
  private let base: any ChainVerifier
  private let lock = NSLock()
  private var calls = 0

  public init(_ base: any ChainVerifier) { self.base = base }

  public var count: Int { lock.withLock { calls } }

  public func verify(
    _ chain: PresentedChain, anchors: AnchorSource, purpose: VerificationPurpose, at time: Date,
    accept: (ChainVerification) -> ChainFailure?
  ) -> ChainVerification {
    lock.withLock { calls += 1 }
    return base.verify(chain, anchors: anchors, purpose: purpose, at: time, accept: accept)
  }

  public func certificates(of chain: PresentedChain) -> [Certificate] { base.certificates(of: chain) }
}

/// A file holding `text` in the temporary directory; `remove()` deletes it.
public struct TemporaryFile {
  public let path: String

  public init(_ text: String, suffix: String = ".yaml") throws {
    path =
      FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-\(UUID().uuidString)\(suffix)")
      .path
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
  }

  public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
